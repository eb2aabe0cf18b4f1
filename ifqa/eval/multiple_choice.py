"""Multiple-choice accuracy (task ``mc``): FaithEval's counterfactual set, and any Hub set in the ARC
layout (``choices: {label, text}`` with an ``answerKey``).

A question's options are in ``meta["choices"]`` as ``[label, text]`` pairs, the right one's label in
``meta["answer_key"]`` and its text as the answer. A prediction chooses an option by its label ("B",
"(B)", "B. granite", "Answer: B", "Option B") or by its text (the option's whole text, or the one
option's text it contains); a prediction that names none, or names several ("B, C", "B and C", "B or
C", "B/C"), is unanswered, scored wrong and counted. Options are compared by label, so two options
with the same text stay two. Readers write the chosen option as ``B. granite``: it reads as an answer
and parses back to the same label. Options given as plain texts are labelled A to Z, then AA, AB, ...
(``option_labels``), so labels stay unique whatever the number of options.
"""

from __future__ import annotations

import collections
import re
from collections.abc import Mapping, Sequence
from typing import Any

from ifqa.eval.answers import normalize_answer
from ifqa.eval.report import accuracy_lines
from ifqa.eval.significance import accuracy, paired_test

_PREFIX = r"^\s*(?:(?:the\s+)?(?:correct\s+|right\s+|final\s+)?(?:answer|option|choice)s?\s*(?:is|are|:)?\s*)?"
_ONE = r"[(\[*]*([A-Za-z]{1,2}|[0-9]{1,3})"  # a label: one or two letters (past Z: AA, AB ...) or a number
#: A label at the start ("B", "(B)", "B)", "B.", "B,", "**B**", "Answer: B", "The correct answer is
#: B", "Option B"): its letters or number, and the mark after it.
_LABEL = re.compile(_PREFIX + _ONE + r"([)\].:,*]*)(?=\s|$)", re.I)
#: Two labels named as a list ("B, C", "B and C", "B or C", "B/C", "(B) & (C)"): no single choice.
_SEVERAL = re.compile(
    _PREFIX
    + _ONE
    + r"[)\].*]*\s*(?:,|/|&|\band\b|\bor\b)\s*(?:(?:and|or)\s+)?"
    + _ONE
    + r"[)\].*]*\s*(?:$|[,/&.]|\band\b|\bor\b)",
    re.I,
)


def option_labels(count: int) -> list[str]:
    """Labels for options given as plain texts: A to Z, then AA, AB ... as spreadsheet columns go
    (unique, upper case, readable for any number of options)."""
    labels = []
    for number in range(1, count + 1):
        label = ""
        while number:
            number, letter = divmod(number - 1, 26)
            label = chr(ord("A") + letter) + label
        labels.append(label)
    return labels


def answer_label(key: Any, choices: Sequence[tuple[str, str]]) -> str | None:
    """The right option's label from a dataset's answer key: a label, a 0-based position where the
    labels are not numbers, or anything ``chosen`` reads (an option's text, "B)" ...); None: no option."""
    key = str(key).strip() if key is not None else ""
    labels = [label for label, _ in choices]
    if key in labels:
        return key
    if key.isdigit() and not any(label.isdigit() for label in labels) and int(key) < len(labels):
        return labels[int(key)]
    return chosen(key, choices)


def options(example) -> list[tuple[str, str]]:
    """The ``(label, text)`` options of a multiple-choice question (none for any other)."""
    return [(str(label), str(text)) for label, text in example.meta.get("choices") or []]


def shown_options(example) -> str:
    """The options as a prompt lists them, one a line: ``A. text``."""
    return "\n".join(f"{label}. {text}" for label, text in options(example))


def shown_choice(label: str, choices: Sequence[tuple[str, str]]) -> str:
    """An option as readers write it: ``B. text``."""
    return f"{label}. {dict(choices)[label]}"


def chosen(prediction: str, choices: Sequence[tuple[str, str]]) -> str | None:
    """The label of the option a prediction chooses, or None when it chooses none (or several)."""
    if not prediction.strip() or not choices:
        return None
    by_label = {label.upper(): label for label, _ in choices}
    several = _SEVERAL.match(prediction)
    if several and {several.group(1).upper(), several.group(2).upper()} <= by_label.keys():
        if several.group(1).upper() != several.group(2).upper():
            return None
    found = _LABEL.match(prediction)
    if found:
        rest = prediction[found.end() :].strip()
        label = by_label.get(found.group(1).upper())
        # "B", "B) granite", "B granite" (its own text); not "a dog", an article before an option's text
        if label is not None and (not rest or found.group(2) or _same(rest, dict(choices)[label])):
            return label
    whole = [label for label, text in choices if _same(prediction, text)]
    if whole:
        return whole[0] if len(whole) == 1 else None
    said = f" {normalize_answer(prediction)} "
    within = [label for label, text in choices if normalize_answer(text) and f" {normalize_answer(text)} " in said]
    return within[0] if len(within) == 1 else None


def _same(first: str, second: str) -> bool:
    return normalize_answer(first) == normalize_answer(second)


def gold(example) -> str | None:
    """The right option's label (older records without one: the first option whose text is the answer)."""
    key = example.meta.get("answer_key")
    if key is not None:
        return str(key)
    return next((label for label, text in options(example) if text == example.answers[0]), None)


def summarize_choices(
    examples: Sequence[Any], predictions: Mapping[str, str], compare: Mapping[str, str] | None = None
) -> dict[str, Any]:
    """Accuracy with a 95% bootstrap interval, by number of options; paired test vs ``compare``."""

    def correct(preds: Mapping[str, str]) -> list[float]:
        return [float(chosen(preds.get(e.qid, ""), options(e)) == gold(e)) for e in examples]

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
    lines = accuracy_lines(report, "multiple-choice", "chose an option", {"options": "by_options"})
    if report["unknown_qids"]:
        lines.append(f"\n{report['unknown_qids']} predictions name questions not in the set (ignored)")
    return "\n".join(lines)
