"""Iterative reading's steps, scored: gold-passage recall over every step's passages beside the first
search's (what one search found), steps and searches per question, and why questions stopped."""

from __future__ import annotations

import collections
from collections.abc import Sequence
from typing import Any

from ifqa.eval.passages import percent
from ifqa.eval.significance import bootstrap_ci


def summarize_steps(records: Sequence[dict]) -> dict[str, Any] | None:
    """The steps report of prediction records that carry ``steps`` (None when none does)."""
    traced = [r for r in records if isinstance(r.get("steps"), list)]
    if not traced:
        return None
    searched = [[s for s in r["steps"] if isinstance(s, dict) and isinstance(s.get("passages"), list)] for r in traced]
    all_steps = [float(any(p.get("gold") for s in steps for p in s["passages"])) for steps in searched]
    first = [float(any(p.get("gold") for p in steps[0]["passages"])) if steps else 0.0 for steps in searched]
    return {
        "n": len(traced),
        "gold_recall_all_steps": round(percent(all_steps), 2),
        "gold_recall_all_steps_ci95": list(bootstrap_ci(all_steps)),
        "gold_recall_first_search": round(percent(first), 2),
        "steps_per_question": round(sum(len(r["steps"]) for r in traced) / len(traced), 2),
        "searches_per_question": round(sum(int(r.get("searches", 0)) for r in traced) / len(traced), 2),
        "stopped": dict(collections.Counter(str(r.get("stopped")) for r in traced)),
    }
