"""`ifqa retrieve` (the retrieval pipeline) and `ifqa convert` (TREC and DPR run formats)."""

from __future__ import annotations

import json
from pathlib import Path

import click

from ifqa.artifacts import read_run
from ifqa.cli.options import (
    TypedText,
    given_run,
    output_option,
    question_options,
    question_source,
    recorded_question_options,
    retrieval_config,
    retrieval_options,
    run_input,
)
from ifqa.datasets import questions_for
from ifqa.errors import IfqaError


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
    from ifqa.api import Pipeline
    from ifqa.eval import report
    from ifqa.eval.summary import summarize_run
    from ifqa.tables import table

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


@click.command("convert")
@run_input("The run to convert, in the format --from names.")
@click.option(
    "--from",
    "from_",
    type=click.Choice(["run", "trec", "dpr"]),
    default="run",
    show_default=True,
    help="Format of --run.",
)
@click.option(
    "--to",
    "to",
    type=click.Choice(["run", "trec", "dpr", "qrels"]),
    required=True,
    help="Format to write (qrels: the run's gold passages, for trec_eval).",
)
@output_option("The converted file.")
@recorded_question_options
@click.option("--corpus", type=click.Path(dir_okay=False), help="The collection (needed to read a TREC run).")
@click.option("--tag", default="ifqa", show_default=True, help="Run tag for TREC output.")
def convert(run_option, run_argument, from_, to, output, setting, split, questions, data_dir, corpus, tag) -> None:
    """Convert runs between ifqa's JSONL, TREC run files and DPR's retrieval JSON."""
    source = given_run(run_option, run_argument)
    from ifqa.retrieval import convert as conv

    if from_ == to:
        raise IfqaError("--from and --to are the same format")
    names = question_source(setting, split, questions, data_dir)
    if from_ == "run":
        if names.given:
            questions_for(source, names)  # a run made for other questions is refused
        records = read_run(source)
        if to == "qrels":
            if any("gold" not in ctx for r in records for ctx in r["ctxs"]):
                raise IfqaError(
                    "the run has no gold flags; make it with `ifqa retrieve` or score it with --setting/--split", source
                )
            conv.run_to_qrels(records, output)
        else:
            (conv.run_to_trec(records, output, tag) if to == "trec" else conv.run_to_dpr(records, output))
        count = len(records)
    else:
        if to != "run":
            raise IfqaError("convert TREC or DPR files to 'run' first")
        question_set = names.load()
        if from_ == "trec":
            if not corpus:
                raise IfqaError("--corpus is needed to read passage texts for a TREC run")
            count = conv.trec_to_run(source, question_set, corpus, output)
        else:
            count = conv.dpr_to_run(source, question_set, output)
    click.echo(f"{output}: {count} questions")


COMMANDS = [retrieve, convert]
