"""`ifqa rerank --run RUN --model M --depth N -o RUN2`: re-score a run's top passages with a cross-encoder."""

from __future__ import annotations

import json

import click

from ifqa.api import Reranker
from ifqa.cli.options import (
    count_option,
    given_run,
    output_option,
    question_source,
    recorded_question_options,
    run_input,
    runtime_label,
    runtime_options,
)
from ifqa.datasets import questions_for
from ifqa.devices import PRECISIONS
from ifqa.eval import report
from ifqa.eval.summary import summarize_run
from ifqa.retrieval.config import FIELDS
from ifqa.retrieval.rerank_run import read_rerankable, rerank_run


@click.command()
@run_input("The run to rerank (made by `ifqa retrieve`, or converted with passage texts).")
@click.option(
    "--model",
    required=True,
    help="Cross-encoder: a folder from `ifqa train reranker` or a hub id "
    "(cross-encoder/ms-marco-MiniLM-L-6-v2, BAAI/bge-reranker-base, ...).",
)
@count_option("--depth", "Passages re-scored per question.", default=100)
@output_option("The reranked run (+ manifest).")
@recorded_question_options
@count_option("--batch-size", "Pairs scored together (default: 512 on a GPU, 16 on a CPU).")
@count_option(
    "--max-batch-tokens",
    "A token budget per batch, as text-embeddings-inference's: longest pairs first, as many as fit it padded; "
    "--batch-size then caps the rows only when given.",
)
@click.option("--max-length", type=click.IntRange(min=16), help="Tokens per pair (default: the model's).")
@click.option("--device", help="cpu, cuda ... (default: GPU when present).")
@click.option(
    "--precision",
    type=click.Choice(PRECISIONS),
    default="auto",
    show_default=True,
    help=FIELDS["rerank_precision"].metadata["help"],  # as --rerank-precision says it on retrieve and serve
)
@runtime_options("Scoring")
@click.option("--json", "as_json", is_flag=True, help="Print the recall report as JSON.")
@click.option("--no-progress", is_flag=True, help="Hide the progress bar.")
def rerank(run_option, run_argument, runtime, quantize, as_json, no_progress, **options) -> None:
    """Rerank a run file (resumable: rerun the same command after an interruption)."""
    run, output = given_run(run_option, run_argument), options.pop("output")
    records = read_rerankable(run, options["depth"])  # parsed once: a bad run fails before the model loads
    source = question_source(*(options.pop(key) for key in ("setting", "split", "questions", "data_dir")))
    question_set = questions_for(run, source, records)
    # options: model, depth, batch_size, max_batch_tokens, max_length, device, precision
    reranker = Reranker(runtime=runtime_label(runtime, quantize), **options)
    written = rerank_run(run, reranker.model, output, question_set, not no_progress, records)
    result = summarize_run(written)  # flagged for these questions as it was written: not flagged again
    click.echo(json.dumps(result) if as_json else f"run: {output}\n\n" + report.format_run_report(result))


COMMANDS = [rerank]
