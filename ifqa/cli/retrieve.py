"""`ifqa retrieve`: the retrieval pipeline over a question set (or one --query), recall printed."""

from __future__ import annotations

import json
from pathlib import Path

import click

from ifqa.api import Pipeline
from ifqa.cli.options import (
    TypedText,
    output_option,
    question_options,
    question_source,
    retrieval_config,
    retrieval_options,
)
from ifqa.errors import IfqaError
from ifqa.eval import report
from ifqa.eval.summary import summarize_run
from ifqa.tables import table


def default_run_name(label: str, indexes: list[str], k: int, query_mode: str, rerank: str | None = None) -> str:
    """``<questions>-k<k>.jsonl`` for the demo index; other indexes, query modes and rerankers are named too."""
    parts = [label]
    if indexes != ["demo:bm25"]:
        parts.append("+".join(Path(i.replace(":", "-")).name for i in indexes))
    if query_mode != "question":
        parts.append(query_mode)
    if rerank:
        parts.append("rerank-" + Path(rerank.rstrip("/")).name)
    return "-".join(parts) + f"-k{k}.jsonl"


#: What differs from ``RetrievalConfig``'s defaults on the command line (a user's machine has cores to spare).
RETRIEVE_DEFAULTS = {"threads": 2}


@click.command()
@retrieval_options(RETRIEVE_DEFAULTS)
@question_options
@click.option("--query", type=TypedText(), help="One ad-hoc question: print its top passages instead of writing a run.")
@output_option("Run file (default runs/<questions>[-<indexes>]-k<k>.jsonl).", required=False)
@click.option("--json", "as_json", is_flag=True, help="Print the recall report as JSON.")
@click.option("--no-progress", is_flag=True, help="Hide the progress bar.")
def retrieve(setting, split, questions, data_dir, query, output, as_json, no_progress, **settings) -> None:
    """Retrieve passages for a question set, write the run file and print recall@K."""
    config = retrieval_config(settings, RETRIEVE_DEFAULTS)
    if query is not None and not query.strip():
        raise IfqaError("--query is empty; give a question, or leave --query out to retrieve for a question set")
    pipeline = Pipeline(config)  # the public API's pipeline: one wiring for the CLI and Python
    if query:
        rows = [
            [hit.rank, f"{hit.score:.3f}", hit.id, hit.title, hit.text[:90] + "..."] for hit in pipeline.search(query)
        ]
        click.echo(table(["rank", "score", "id", "title", "text"], rows))
        return
    source = question_source(setting, split, questions, data_dir)
    question_set = source.load()
    output = output or Path("runs") / default_run_name(
        source.label, config.indexes, config.k, config.query_mode, config.rerank
    )
    records = pipeline.run_to_file(question_set, output, progress=not no_progress)
    result = summarize_run(records)
    click.echo(json.dumps(result) if as_json else f"run: {output}\n\n" + report.format_run_report(result))


COMMANDS = [retrieve]
