"""Short answers out of model chatter, and majority voting over samples."""

from __future__ import annotations

import collections
import re
from collections.abc import Sequence

from ifqa.eval import multiple_choice
from ifqa.eval.answers import normalize_answer

_SO_THE_ANSWER = re.compile(
    r"(?:so\s+)?the\s+(?:final\s+)?answer\s+(?:is|would\s+be|will\s+be)\s*:?\s*(.+)", re.I | re.S
)
_ANSWER_LABEL = re.compile(r"^\s*(?:final\s+)?answer\s*:\s*(.+)", re.I | re.S | re.M)
_QUOTES = "\"'“”‘’`*"
_BOXED = re.compile(r"\\boxed\{((?:[^{}]|\{[^{}]*\})*)\}")


def extract(output: str, reasoning: bool = False) -> tuple[str, str]:
    """``(answer, rationale)`` from a completion.

    Takes the last ``\\boxed{...}``, else the text after the last "the answer is" (or an "Answer:"
    label), else — without reasoning — the first non-empty line; then keeps its first line and strips quotes, markdown
    emphasis, a trailing period and "The answer is" left-overs.
    """
    text = output.strip()
    rationale = ""
    boxed = list(_BOXED.finditer(text))
    if boxed:  # reasoning models box their final answer (\boxed{...}): the last box is the answer
        return clean(boxed[-1].group(1).replace("\\text{", "").replace("}", "")), text[: boxed[-1].start()].strip()
    matches = list(_SO_THE_ANSWER.finditer(text))
    if matches:
        last = matches[-1]
        rationale, candidate = text[: last.start()].strip(), last.group(1)
    else:
        labelled = list(_ANSWER_LABEL.finditer(text))
        if labelled:
            rationale, candidate = text[: labelled[-1].start()].strip(), labelled[-1].group(1)
        elif reasoning:
            lines = [line for line in text.splitlines() if line.strip()]
            rationale, candidate = "\n".join(lines[:-1]), lines[-1] if lines else ""
        else:
            candidate = next((line for line in text.splitlines() if line.strip()), "")
    return clean(candidate), rationale


def clean(candidate: str) -> str:
    answer = candidate.strip().splitlines()[0] if candidate.strip() else ""
    answer = re.sub(r"^(?:the\s+)?answer\s*(?:is|:)\s*", "", answer, flags=re.I)
    answer = answer.strip().strip(_QUOTES).strip()
    answer = re.sub(r"[.。]+$", "", answer).strip().strip(_QUOTES).strip()
    return answer


def majority(answers: Sequence[str]) -> str:
    """The most frequent answer after SQuAD normalization; ties go to the earliest sample."""
    if not answers:
        return ""
    counts = collections.Counter(normalize_answer(a) for a in answers)
    best = max(counts.values())
    return next(a for a in answers if counts[normalize_answer(a)] == best)


_WIQA_LABEL = re.compile(r"\b(more|less|no[\s_-]+effect)\b", re.I)


def for_task(answer: str, rationale: str, task: str, example=None) -> tuple[str, str]:
    """The answer in the task's form: for WIQA one of its labels (the first one named), for a
    multiple-choice question the chosen option as ``B. text``; "" (abstain) where it names none. A
    question without options (one typed into ``ifqa serve``) keeps the model's answer."""
    choices = multiple_choice.options(example) if example is not None else []
    if task == "mc" and choices:
        label = multiple_choice.chosen(answer, choices)
        return (multiple_choice.shown_choice(label, choices) if label else ""), rationale
    if task != "wiqa":
        return answer, rationale
    from ifqa.eval.wiqa import normalize_label

    found = _WIQA_LABEL.search(answer)
    return (normalize_label(found.group(1)) if found else ""), rationale


def shown_question(example, task: str) -> str:
    """How a question is written in a prompt: a multiple-choice one with its options below it."""
    shown = multiple_choice.shown_options(example) if task == "mc" else ""
    return f"{example.question}\n{shown}" if shown else example.question


def shown_answer(example, task: str) -> str:
    """How a demonstration's answer is written in a prompt (WIQA's ``no_effect`` as "no effect"; a
    multiple-choice answer as its option's label)."""
    answer = example.answers[0]
    if task == "mc":
        return multiple_choice.gold(example) or answer
    return answer.replace("_", " ") if task == "wiqa" else answer
