"""`ifqa corpus build`."""

from __future__ import annotations

import click

from ifqa.cli.options import count_option, output_option
from ifqa.corpus.build import build
from ifqa.tables import table


@click.group()
def corpus() -> None:
    """Build the passage collection from Wikipedia."""


@corpus.command("build")
@click.argument("inputs", nargs=-1, required=True, type=click.Path())
@output_option("passages.jsonl, or .tsv for DPR's id/text/title layout.")
@click.option(
    "--format",
    "format_",
    type=click.Choice(["xml", "wikiextractor-json", "wikiextractor-doc", "passages-jsonl", "passages-tsv"]),
    help="Input format (default: detected from the content).",
)
@count_option("--words", "Words per passage.", default=100)
@count_option("--workers", "Worker processes.", default=1)
@count_option(
    "--batch-size",
    "Records per batch, at most (a batch also closes at 1 MB); the unit of resuming. Multistream bz2 dumps are batched by ~1 MB of compressed streams instead, decompressed by the workers.",
    default=200,
)
@click.option("--no-progress", is_flag=True, help="Hide the progress bar.")
def corpus_build(inputs, output, format_, words, workers, batch_size, no_progress) -> None:
    """Split Wikipedia (XML dump, WikiExtractor output or passages) into disjoint passages.

    Interrupted builds resume when the same command is run again.
    """
    summary = build(list(inputs), output, words, workers, format_, batch_size, progress=not no_progress)
    rows = [["records read", summary.records], ["articles kept", summary.kept]]
    rows += [[f"skipped: {reason}", count] for reason, count in sorted(summary.skipped.items())]
    rows += [["passages written", summary.passages], ["words", summary.words], ["seconds", summary.seconds]]
    click.echo(table(["corpus build", output], rows))


COMMANDS = [corpus]
