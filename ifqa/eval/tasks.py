"""Tasks: how a dataset's predictions are read, scored and reported (``ifqa.registry.TASKS``).

A dataset names its task (IfQA's short answers are ``qa``); ``ifqa evaluate`` and the experiment
runner pick the scorer from it, so the same commands score IfQA, WIQA and CausalQA.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence


@dataclass(frozen=True)
class Task:
    name: str
    headline: tuple[tuple[str, str], ...]  # (report key, column label): what results tables show, each with "<key>_ci95"
    read: Callable[[str | Path], dict[str, str]]
    summarize: Callable[[Sequence[Any], Mapping[str, str], Mapping[str, str] | None], dict[str, Any]]
    format: Callable[[dict[str, Any]], str]
    breakdowns: tuple[str, ...] = ()  # report keys kept in experiment results
    table: tuple[str, str] | None = None  # (breakdown key, metric) drawn as a results.md table, one column per group


def _qa_read(path):
    from ifqa.artifacts import read_predictions

    return read_predictions(path)


def _qa_summarize(examples, predictions, compare=None):
    from ifqa.eval.summary import summarize_predictions

    return summarize_predictions(examples, predictions, compare)


def _qa_format(report):
    from ifqa.eval.report import format_prediction_report

    return format_prediction_report(report)


def _wiqa_read(path):
    from ifqa.eval.wiqa import read_label_predictions

    return read_label_predictions(path)


def _wiqa_summarize(examples, predictions, compare=None):
    from ifqa.eval.wiqa import summarize_wiqa

    return summarize_wiqa(examples, predictions, compare)


def _wiqa_format(report):
    from ifqa.eval.wiqa import format_wiqa_report

    return format_wiqa_report(report)


def _causal_summarize(examples, predictions, compare=None):
    from ifqa.eval.causalqa import summarize_causalqa

    return summarize_causalqa(examples, predictions, compare)


def _causal_format(report):
    from ifqa.eval.causalqa import format_causalqa_report

    return format_causalqa_report(report)


QA = Task("qa", (("em", "EM"), ("f1", "F1")), _qa_read, _qa_summarize, _qa_format, ("by_answer_type", "by_question_word"))
WIQA = Task("wiqa", (("accuracy", "Accuracy"),), _wiqa_read, _wiqa_summarize, _wiqa_format,
            ("by_question_type", "by_path_length"), ("by_question_type", "accuracy"))
CAUSALQA = Task("causalqa", (("rouge_l_f1", "ROUGE-L F1"), ("em", "EM"), ("f1", "F1")), _qa_read, _causal_summarize,
                _causal_format, ("by_source", "macro"), ("by_source", "rouge_l_f1"))


def task_for(questions) -> Task:
    """The task of a ``QuestionSet``."""
    from ifqa.registry import TASKS

    return TASKS.get(getattr(questions, "task", "qa"))
