"""`ifqa evaluate`: the scorer on a predictions file or a run."""

from __future__ import annotations

import json

import click

from ifqa import api
from ifqa.artifacts import check_questions, recorded_questions
from ifqa.cli.options import output_option, question_source, recorded_question_options
from ifqa.datasets import questions_for
from ifqa.errors import IfqaError
from ifqa.eval import report
from ifqa.eval.tasks import task_for
from ifqa.io import write_json


@click.command()
@click.option("--predictions", type=click.Path(dir_okay=False), help="Predictions JSONL {qid, prediction, ...}.")
@click.option(
    "--run", "run_path", type=click.Path(dir_okay=False), help="Retrieval run JSONL {qid, question, answers, ctxs}."
)
@click.option(
    "--compare",
    type=click.Path(dir_okay=False),
    help="A second predictions file (or, with --run, a baseline run): paired difference and p-value.",
)
@click.option(
    "--judgments",
    type=click.Path(dir_okay=False),
    help="With --predictions: ifqa judge's verdicts on them (judge accuracy and its agreement with EM).",
)
@recorded_question_options
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object instead of tables.")
@output_option("Also write the report as JSON (metrics.json).", required=False)
def evaluate(predictions, run_path, compare, judgments, setting, split, questions, data_dir, as_json, output) -> None:
    """Score predictions or a retrieval run (recall@K).

    The metric comes from the questions' dataset: EM/F1 (SQuAD v1.1 rules) for IfQA, accuracy by
    question type and path length for WIQA, ROUGE-L with EM/F1 per source for CausalQA.
    """
    if bool(predictions) == bool(run_path):
        raise IfqaError("give exactly one of --predictions or --run")
    if judgments and not predictions:
        raise IfqaError("--judgments scores predictions: give --predictions with it")
    source = question_source(setting, split, questions, data_dir)
    if predictions:
        question_set = questions_for(predictions, source)
        result = api.evaluate_predictions(predictions, question_set, compare, judgments)  # checks compare, judgments
        text = task_for(question_set).format(result)  # the dataset decides the metric: EM/F1, WIQA accuracy, ROUGE-L
    else:
        # named questions: checked against the run (and the baseline), flags recomputed from them;
        # else the run's own flags, computed from the set its manifest records
        question_set = questions_for(run_path, source) if source.given else None
        recorded_questions(run_path)  # a damaged manifest beside the run is one line, not ignored
        if compare and question_set is not None:
            check_questions(compare, question_set)
        result = api.evaluate_run(run_path, question_set, compare)
        text = report.format_run_report(result)
        if compare:
            text += "\n\n" + report.format_run_comparison(result["compare"], result["recall"].get("gold", {}))
    if output:
        write_json(output, result)
    click.echo(json.dumps(result) if as_json else text)


COMMANDS = [evaluate]
