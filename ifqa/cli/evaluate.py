"""`ifqa evaluate`: the scorer on a predictions file or a run."""

from __future__ import annotations

import json

import click

from ifqa.cli.options import question_options, question_source
from ifqa.errors import IfqaError


def questions_for(path: str, source) -> "object":
    """The questions a file is scored against: the ones named, else the set its manifest records."""
    from ifqa.artifacts import check_questions, recorded_questions
    from ifqa.datasets import QuestionSource

    if not source.given:
        recorded = recorded_questions(path)
        if recorded:
            source = QuestionSource.recorded(recorded, source.data_dir)
    questions = source.load()
    check_questions(path, questions)
    return questions


@click.command()
@click.option("--predictions", type=click.Path(dir_okay=False), help="Predictions JSONL {qid, prediction, ...}.")
@click.option("--run", "run_path", type=click.Path(dir_okay=False), help="Retrieval run JSONL {qid, question, answers, ctxs}.")
@click.option("--compare", type=click.Path(dir_okay=False), help="A second predictions file (or, with --run, a baseline run): paired difference and p-value.")
@question_options
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object instead of tables.")
@click.option("--output", type=click.Path(dir_okay=False), help="Also write the report as JSON (metrics.json).")
def evaluate(predictions, run_path, compare, setting, split, questions, data_dir, as_json, output) -> None:
    """Score predictions or a retrieval run (recall@K).

    The metric comes from the questions' dataset: EM/F1 (SQuAD v1.1 rules) for IfQA, accuracy by
    question type and path length for WIQA, ROUGE-L with EM/F1 per source for CausalQA.
    """
    from ifqa.artifacts import check_questions, read_run
    from ifqa.eval import report
    from ifqa.eval.summary import summarize_run
    from ifqa.io import write_json

    if bool(predictions) == bool(run_path):
        raise IfqaError("give exactly one of --predictions or --run")
    source = question_source(setting, split, questions, data_dir)
    if predictions:
        from ifqa.eval.tasks import task_for

        question_set = questions_for(predictions, source)
        task = task_for(question_set)  # the dataset decides the metric: EM/F1, WIQA accuracy, ROUGE-L
        if compare:
            check_questions(compare, question_set)
        other = task.read(compare) if compare else None
        result = task.summarize(question_set.examples, task.read(predictions), other)
        text = task.format(result)
    else:
        if source.given:  # named questions: checked against the run, and its flags recomputed from them
            examples = questions_for(run_path, source).examples
        else:  # the run's own flags were computed from the set its manifest records
            examples = None
        records = read_run(run_path)
        result = summarize_run(records, examples)
        text = report.format_run_report(result)
        if compare:
            from ifqa.eval.summary import compare_runs

            baseline = read_run(compare)
            if examples is not None:
                check_questions(compare, questions_for(run_path, source))
                summarize_run(baseline, examples)  # flags recomputed from the same questions
            result["compare"] = {"baseline": compare, **compare_runs(records, baseline)}
            text += "\n\n" + report.format_run_comparison(result["compare"], result["recall"].get("gold", {}))
    if output:
        write_json(output, result)
    click.echo(json.dumps(result) if as_json else text)


COMMANDS = [evaluate]
