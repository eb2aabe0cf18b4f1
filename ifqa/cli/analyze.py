"""`ifqa analyze premise`: does a reader follow the counterfactual premise, or answer from memory?"""

from __future__ import annotations

import json

import click

from ifqa.analysis import premise as analysis
from ifqa.cli.options import output_option, question_source, recorded_question_options
from ifqa.datasets import questions_for


@click.group()
def analyze() -> None:
    """Analyses of what a reader wrote."""


@analyze.command("premise")
@click.option("--predictions", required=True, type=click.Path(dir_okay=False), help="A reader's predictions JSONL.")
@click.option(
    "--twins",
    default="rule",
    show_default=True,
    help="The factual twins: 'rule' (the premise dropped, the conditional made indicative), 'llm' (written by "
    "the predictions' own model with prompts/twin.txt; prompt hash and reply kept in twins.jsonl) or a JSONL "
    "file of {qid, question}.",
)
@click.option(
    "--twin-predictions",
    type=click.Path(dir_okay=False),
    help="The same reader's predictions on the twins (default: the predictions' model answers them closed-book).",
)
@click.option("--api-key", help="API key (default $OPENAI_API_KEY). Never logged or stored.")
@recorded_question_options
@output_option(
    "Folder for twins.jsonl, twin-predictions.jsonl, premise.jsonl and premise.json.",
    folder=True,
    owns=("premise.json", "premise.jsonl", "twins.jsonl", "twin-predictions.jsonl"),
)
@click.option("--json", "as_json", is_flag=True, help="Print the report as one JSON object.")
@click.option("--no-progress", is_flag=True, help="Hide the progress bar.")
def premise(
    predictions, twins, twin_predictions, api_key, setting, split, questions, data_dir, output, as_json, no_progress
) -> None:
    """Classify each counterfactual prediction as correct, memory (the model's own factual answer) or other.

    The same model answers each question's factual twin closed-book: that answer is its memory. The
    report gives the classes with 95% intervals, by IfQA's answer types and question words, and by
    whether a gold answer stood in the passages the reader read.
    """
    question_set = questions_for(predictions, question_source(setting, split, questions, data_dir))
    report = analysis.analyze(predictions, question_set, output, twins, twin_predictions, api_key, not no_progress)
    click.echo(json.dumps(report) if as_json else analysis.format_report(report))


COMMANDS = [analyze]
