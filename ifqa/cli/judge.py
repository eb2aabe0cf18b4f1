"""`ifqa judge`: an LLM decides whether each prediction gives a gold answer under the question's premise."""

from __future__ import annotations

import click

from ifqa import api
from ifqa.artifacts import read_predictions
from ifqa.cli.options import output_option, question_source, recorded_question_options
from ifqa.configs import click_options, from_options
from ifqa.datasets import questions_for
from ifqa.eval.tasks import task_for
from ifqa.judge.config import JudgeConfig
from ifqa.judge.run import judge as run_judge


@click.command()
@click.option(
    "--predictions", required=True, type=click.Path(dir_okay=False), help="Predictions JSONL {qid, prediction, ...}."
)
@click_options(JudgeConfig)
@click.option("--api-key", help="API key (default $OPENAI_API_KEY). Never logged or stored.")
@recorded_question_options
@output_option("Judgments JSONL {qid, verdict, reason, raw} (+ manifest).")
@click.option("--json", "as_json", is_flag=True, help="Print the report as one JSON object instead of tables.")
@click.option("--no-progress", is_flag=True, help="Hide the progress bar.")
def judge(predictions, api_key, setting, split, questions, data_dir, output, as_json, no_progress, **options) -> None:
    """Judge predictions with an LLM, then print the report with judge accuracy beside EM, F1 and containment.

    Replies are cached as they arrive (as ifqa read llm's are): a rerun, after a kill too, sends no
    request twice. The prompt is prompts/judge.txt (--prompts-dir for your own).
    """
    import json

    config = from_options(JudgeConfig, options)
    question_set = questions_for(predictions, question_source(setting, split, questions, data_dir))
    api.evaluate_predictions(predictions, question_set)  # predictions the questions can score, before any request
    counters = run_judge(
        config, read_predictions(predictions), question_set, output, predictions, api_key, not no_progress
    )
    report = api.evaluate_predictions(predictions, question_set, judgments=output)
    click.echo(json.dumps(report) if as_json else task_for(question_set).format(report))
    click.echo(
        f"judgments: {output}  requests: {counters['requests']}  cache hits: {counters['cache_hits']}"
        f"  unclear: {counters['unclear']}"
    )


COMMANDS = [judge]
