"""Descriptive statistics of a question set (`ifqa data stats`)."""

from __future__ import annotations

import collections
import statistics
from collections.abc import Sequence
from typing import Any

from ifqa.eval.categories import ANSWER_TYPES, QUESTION_WORDS, answer_type, question_word
from ifqa.tables import table


def _lengths(values: Sequence[int]) -> dict[str, float]:
    if not values:
        return {"mean": 0.0, "median": 0.0, "max": 0}
    return {"mean": round(statistics.fmean(values), 2), "median": float(statistics.median(values)), "max": max(values)}


def split_stats(examples: Sequence[Any]) -> dict[str, Any]:
    n = len(examples)
    types = collections.Counter(answer_type(example.answers[0]) for example in examples)
    words = collections.Counter(question_word(example.question) for example in examples)
    return {
        "n": n,
        "question_words": _lengths([len(example.question.split()) for example in examples]),
        "answer_words": _lengths([len(example.answers[0].split()) for example in examples]),
        "multi_answer_share": round(100 * sum(len(example.answers) > 1 for example in examples) / n, 2) if n else 0.0,
        "gold_passages_per_question": round(sum(len(example.context) for example in examples) / n, 2) if n else 0.0,
        "answer_types": {name: types[name] for name in ANSWER_TYPES if types[name]},
        "question_word_counts": {name: words[name] for name in QUESTION_WORDS if words[name]},
    }


def format_stats(stats: dict[str, Any]) -> str:
    n = stats["n"] or 1
    rows = [
        ["questions", stats["n"]],
        [
            "question length (words): mean / median / max",
            "{mean} / {median:g} / {max}".format(**stats["question_words"]),
        ],
        ["answer length (words): mean / median / max", "{mean} / {median:g} / {max}".format(**stats["answer_words"])],
        ["questions with several answers (%)", stats["multi_answer_share"]],
        ["gold passages per question", stats["gold_passages_per_question"]],
    ]
    parts = [table(["statistic", "value"], rows)]
    for key, label in (("answer_types", "answer type"), ("question_word_counts", "question word")):
        parts.append(table([label, "n", "%"], [[name, count, 100 * count / n] for name, count in stats[key].items()]))
    return "\n\n".join(parts)
