"""Multiple-choice accuracy (task ``mc``): FaithEval's counterfactual set, and any Hub set in the ARC
layout (``choices: {label, text}`` with an ``answerKey``).

A question's options are in ``meta["choices"]`` as ``[label, text]`` pairs and its gold answer is
the text of the right option. A prediction chooses an option by its label ("B", "(B)", "B. granite",
"Answer: B") or by its text (the option's whole text, or the one option's text it contains); a
prediction that names none is unanswered, scored wrong and counted. Readers write the chosen option's
text, so an answer reads as an answer and the premise analysis compares texts.
"""

from __future__ import annotations

import collections
import re
from collections.abc import Mapping, Sequence
from typing import Any

from ifqa.eval.answers import normalize_answer
from ifqa.eval.significance import accuracy, interval, paired_test
from ifqa.tables import table

#: A label at the start ("B", "(B)", "B)", "B.", "**B**", "Answer: B"): its letter, and the mark after it.
_LABEL = re.compile(
    r"^\s*(?:(?:the\s+)?(?:final\s+)?answer\s*(?:is|:)\s*)?[(\[*]*([A-Za-z0-9])([)\].:*]*)(?=\s|$)", re.I
)


def options(example) -> list[tuple[str, str]]:
    """The ``(label, text)`` options of a multiple-choice question (none for any other)."""
    return [(str(label), str(text)) for label, text in example.meta.get("choices") or []]


def shown_options(example) -> str:
    """The options as a prompt lists them, one a line: ``A. text``."""
    return "\n".join(f"{label}. {text}" for label, text in options(example))


def chosen(prediction: str, choices: Sequence[tuple[str, str]]) -> str | None:
    """The text of the option a prediction chooses, or None when it chooses none (or several)."""
    if not prediction.strip() or not choices:
        return None
    found = _LABEL.match(prediction)
    if found:
        by_label = {label.upper(): text for label, text in choices}
        rest = prediction[found.end() :].strip()
        text = by_label.get(found.group(1).upper())
        # "B", "B) granite", "B granite" (its own text); not "a dog", an article before an option's text
        if text is not None and (not rest or found.group(2) or normalize_answer(rest) == normalize_answer(text)):
            return text
    said = normalize_answer(prediction)
    whole = [text for _, text in choices if normalize_answer(text) == said]
    if whole:
        return whole[0]
    within = {text for _, text in choices if normalize_answer(text) and f" {normalize_answer(text)} " in f" {said} "}
    return within.pop() if len(within) == 1 else None


def summarize_choices(
    examples: Sequence[Any], predictions: Mapping[str, str], compare: Mapping[str, str] | None = None
) -> dict[str, Any]:
    """Accuracy with a 95% bootstrap interval, by number of options; paired test vs ``compare``."""

    def correct(preds: Mapping[str, str]) -> list[float]:
        return [float(chosen(preds.get(e.qid, ""), options(e)) == e.answers[0]) for e in examples]

    scores = correct(predictions)
    overall = accuracy(scores)
    by_options: dict[str, list[float]] = collections.defaultdict(list)
    for example, score in zip(examples, scores):
        by_options[str(len(options(example)))].append(score)
    report: dict[str, Any] = {
        "task": "mc",
        "n": len(examples),
        "answered": sum(1 for e in examples if chosen(predictions.get(e.qid, ""), options(e)) is not None),
        "accuracy": overall["accuracy"],
        "accuracy_ci95": overall["ci95"],
        "by_options": {name: accuracy(group) for name, group in sorted(by_options.items(), key=lambda i: int(i[0]))},
        "unknown_qids": len(set(predictions) - {e.qid for e in examples}),
    }
    if compare is not None:
        other = correct(compare)
        report["compare"] = {"accuracy": accuracy(other)["accuracy"], "accuracy_difference": paired_test(scores, other)}
    return report


def format_choices_report(report: dict[str, Any]) -> str:
    lines = [
        f"multiple-choice accuracy {report['accuracy']:.2f} {interval(report['accuracy_ci95'])} over {report['n']} "
        f"questions ({report['answered']} chose an option)",
        "",
        table(
            ["options", "n", "accuracy", "95% CI"],
            [[name, g["n"], f"{g['accuracy']:.2f}", interval(g["ci95"])] for name, g in report["by_options"].items()],
        ),
    ]
    if "compare" in report:
        c = report["compare"]
        d = c["accuracy_difference"]
        lines += [
            "",
            f"vs the compared predictions ({c['accuracy']:.2f}): {d['difference']:+.2f} {interval(d['ci95'])}, "
            f"paired permutation p={d['p_value']:.4f}",
        ]
    if report["unknown_qids"]:
        lines.append(f"\n{report['unknown_qids']} predictions name questions not in the set (ignored)")
    return "\n".join(lines)
