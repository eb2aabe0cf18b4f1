"""WIQA scoring: 3-way accuracy (more / less / no_effect), overall, by question type and by path length.

The WIQA paper reports accuracy by question type: in-paragraph effects (``INPARA_EFFECT``),
out-of-paragraph effects (``EXOGENOUS_EFFECT``) and no-effect distractors (``OUTOFPARA_DISTRACTOR``). Predictions must be one of the three labels
("no effect" and any letter case are accepted); an empty prediction is an abstention, scored
wrong and counted. Anything else is an error naming the file and line.
"""

from __future__ import annotations

import collections
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ifqa.artifacts import read_predictions
from ifqa.eval.report import accuracy_lines
from ifqa.eval.significance import accuracy, interval, paired_test

LABELS = ("more", "less", "no_effect")
#: WIQA's ques_type values -> the paper's names for them.
QUESTION_TYPES = {"INPARA_EFFECT": "in-para", "EXOGENOUS_EFFECT": "out-of-para", "OUTOFPARA_DISTRACTOR": "no-effect"}


def normalize_label(text: str) -> str | None:
    """The label a prediction names, "" for an abstention, None when it names none of the three."""
    label = "_".join(text.strip().lower().replace("-", " ").split())
    if label == "":
        return ""
    return label if label in LABELS else None


def to_label(prediction: str) -> str:
    """The label a prediction names ("" to abstain); ``ValueError`` when it names none of the three."""
    label = normalize_label(prediction)
    if label is None:
        raise ValueError(f"prediction {prediction!r} is not a WIQA label (more, less, no_effect, or empty to abstain)")
    return label


def read_label_predictions(path: str | Path) -> dict[str, str]:
    """``qid -> label`` from a predictions JSONL whose predictions must be WIQA labels."""
    return read_predictions(path, to_label)


def _groups(examples: Sequence[Any], correct: Sequence[float], key) -> dict[str, dict[str, Any]]:
    groups: dict[str, list[float]] = collections.defaultdict(list)
    for example, value in zip(examples, correct):
        groups[key(example)].append(value)
    order = list(QUESTION_TYPES.values())  # the paper's column order, then anything else
    ranked = sorted(groups, key=lambda name: (order.index(name) if name in order else len(order), name))
    return {name: accuracy(groups[name]) for name in ranked}


def question_type(example) -> str:
    kind = example.meta.get("question_type", "")
    return QUESTION_TYPES.get(kind, kind or "unknown")


def summarize_wiqa(
    examples: Sequence[Any], predictions: Mapping[str, str], compare: Mapping[str, str] | None = None
) -> dict[str, Any]:
    """Accuracy with 95% bootstrap intervals, by question type and path length; paired test vs ``compare``."""
    correct = [float(predictions.get(e.qid, "") == e.answers[0]) for e in examples]
    overall = accuracy(correct)
    report: dict[str, Any] = {
        "task": "wiqa",
        "n": len(examples),
        "answered": sum(1 for e in examples if predictions.get(e.qid, "")),
        "accuracy": overall["accuracy"],
        "accuracy_ci95": overall["ci95"],
        "by_question_type": _groups(examples, correct, question_type),
        "by_path_length": _groups(examples, correct, lambda e: str(e.meta.get("path_length", "unknown"))),
        "gold_labels": dict(collections.Counter(e.answers[0] for e in examples)),
        "predicted_labels": dict(collections.Counter(predictions.get(e.qid, "") or "(none)" for e in examples)),
        "unknown_qids": len(set(predictions) - {e.qid for e in examples}),
    }
    if compare is not None:
        other = [float(compare.get(e.qid, "") == e.answers[0]) for e in examples]
        by_type: dict[str, list[int]] = collections.defaultdict(list)
        for i, example in enumerate(examples):
            by_type[question_type(example)].append(i)
        report["compare"] = {
            "accuracy": accuracy(other)["accuracy"],
            "accuracy_difference": paired_test(correct, other),
            "by_question_type": {
                name: paired_test([correct[i] for i in idx], [other[i] for i in idx])
                for name, idx in sorted(by_type.items())
            },
        }
    return report


def format_wiqa_report(report: dict[str, Any]) -> str:
    groups = {"question type": "by_question_type", "path length": "by_path_length"}
    lines = accuracy_lines(report, "WIQA", "answered", groups)
    for name, t in report.get("compare", {}).get("by_question_type", {}).items():
        lines.append(f"  {name}: {t['difference']:+.2f} {interval(t['ci95'])}, p={t['p_value']:.4f}")
    lines += ["", "gold labels: " + ", ".join(f"{k} {v}" for k, v in sorted(report["gold_labels"].items()))]
    lines[-1] += "; predicted: " + ", ".join(f"{k} {v}" for k, v in sorted(report["predicted_labels"].items()))
    if report["unknown_qids"]:
        lines.append(f"\n{report['unknown_qids']} predictions name questions not in the set (ignored)")
    return "\n".join(lines)
