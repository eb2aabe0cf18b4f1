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


def _lazy(target: str) -> Callable:
    """``"module:function"``, imported on the first call (scorers pull numpy and rouge-score)."""
    module, _, name = target.partition(":")

    def call(*args):
        return getattr(importlib.import_module(module), name)(*args)

    return call


@dataclass(frozen=True, kw_only=True)
class Task:
    """A task, declared by its parts: ``headline``, the (report key, column label) pairs results tables show
    (each with ``<key>_ci95``); ``read`` a predictions file (by default as ``ifqa read`` writes it);
    ``summarize`` and ``format`` the report; ``breakdowns``, the report keys experiment results keep;
    ``table``, a (breakdown key, metric) drawn as a results.md table with a column per group."""

    name: str
    headline: tuple[tuple[str, str], ...]
    summarize: Callable[[Sequence[Any], Mapping[str, str], Mapping[str, str] | None], dict[str, Any]]
    format: Callable[[dict[str, Any]], str]
    read: Callable[[str | Path], dict[str, str]] = _lazy("ifqa.artifacts:read_predictions")
    breakdowns: tuple[str, ...] = ()
    table: tuple[str, str] | None = None


QA = Task(
    name="qa",
    headline=(("em", "EM"), ("f1", "F1"), ("containment", "Containment")),
    summarize=_lazy("ifqa.eval.summary:summarize_predictions"),
    format=_lazy("ifqa.eval.report:format_prediction_report"),
    breakdowns=("by_answer_type", "by_question_word"),
)
WIQA = Task(
    name="wiqa",
    headline=(("accuracy", "Accuracy"),),
    read=_lazy("ifqa.eval.wiqa:read_label_predictions"),
    summarize=_lazy("ifqa.eval.wiqa:summarize_wiqa"),
    format=_lazy("ifqa.eval.wiqa:format_wiqa_report"),
    breakdowns=("by_question_type", "by_path_length"),
    table=("by_question_type", "accuracy"),
)
CAUSALQA = Task(
    name="causalqa",
    headline=(("rouge_l_f1", "ROUGE-L F1"), ("em", "EM"), ("f1", "F1")),
    summarize=_lazy("ifqa.eval.causalqa:summarize_causalqa"),
    format=_lazy("ifqa.eval.causalqa:format_causalqa_report"),
    breakdowns=("by_source", "macro"),
    table=("by_source", "rouge_l_f1"),
)
MULTIPLE_CHOICE = Task(
    name="mc",
    headline=(("accuracy", "Accuracy"),),
    summarize=_lazy("ifqa.eval.multiple_choice:summarize_choices"),
    format=_lazy("ifqa.eval.multiple_choice:format_choices_report"),
    breakdowns=("by_options",),
)


def task_for(questions) -> Task:
    """The task of a ``QuestionSet``."""
    return TASKS.get(getattr(questions, "task", "qa"))
