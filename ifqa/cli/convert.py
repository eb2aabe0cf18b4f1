"""`ifqa convert`: runs between ifqa's JSONL, TREC run files and DPR's retrieval JSON (and qrels)."""

from __future__ import annotations

import click

from ifqa.artifacts import read_run
from ifqa.cli.options import given_run, output_option, question_source, recorded_question_options, run_input
from ifqa.datasets import questions_for
from ifqa.errors import IfqaError
from ifqa.retrieval import convert as conv


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


COMMANDS = [convert]
