"""Tasks: how a dataset's predictions are read, scored and reported (``ifqa.registry.TASKS``).

A dataset names its task (IfQA's short answers are ``qa``); ``ifqa evaluate`` and the experiment
runner pick the scorer from it, so the same commands score IfQA, WIQA, CausalQA and multiple-choice
sets (FaithEval).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ifqa.registry import TASKS


@dataclass(frozen=True)
class Task:
    name: str
    headline: tuple[
        tuple[str, str], ...
    ]  # (report key, column label): what results tables show, each with "<key>_ci95"
    read: Callable[[str | Path], dict[str, str]]
    summarize: Callable[[Sequence[Any], Mapping[str, str], Mapping[str, str] | None], dict[str, Any]]
    format: Callable[[dict[str, Any]], str]
    breakdowns: tuple[str, ...] = ()  # report keys kept in experiment results
    table: tuple[str, str] | None = None  # (breakdown key, metric) drawn as a results.md table, one column per group


def _lazy(target: str) -> Callable:
    """``"module:function"``, imported on the first call (scorers pull numpy and rouge-score)."""
    module, _, name = target.partition(":")

    def call(*args):
        return getattr(importlib.import_module(module), name)(*args)

    return call


QA = Task(
    "qa",
    (("em", "EM"), ("f1", "F1"), ("containment", "Containment")),
    _lazy("ifqa.artifacts:read_predictions"),
    _lazy("ifqa.eval.summary:summarize_predictions"),
    _lazy("ifqa.eval.report:format_prediction_report"),
    ("by_answer_type", "by_question_word"),
)
WIQA = Task(
    "wiqa",
    (("accuracy", "Accuracy"),),
    _lazy("ifqa.eval.wiqa:read_label_predictions"),
    _lazy("ifqa.eval.wiqa:summarize_wiqa"),
    _lazy("ifqa.eval.wiqa:format_wiqa_report"),
    ("by_question_type", "by_path_length"),
    ("by_question_type", "accuracy"),
)
CAUSALQA = Task(
    "causalqa",
    (("rouge_l_f1", "ROUGE-L F1"), ("em", "EM"), ("f1", "F1")),
    _lazy("ifqa.artifacts:read_predictions"),
    _lazy("ifqa.eval.causalqa:summarize_causalqa"),
    _lazy("ifqa.eval.causalqa:format_causalqa_report"),
    ("by_source", "macro"),
    ("by_source", "rouge_l_f1"),
)
MULTIPLE_CHOICE = Task(
    "mc",
    (("accuracy", "Accuracy"),),
    _lazy("ifqa.artifacts:read_predictions"),
    _lazy("ifqa.eval.multiple_choice:summarize_choices"),
    _lazy("ifqa.eval.multiple_choice:format_choices_report"),
    ("by_options",),
)


def task_for(questions) -> Task:
    """The task of a ``QuestionSet``."""
    return TASKS.get(getattr(questions, "task", "qa"))
