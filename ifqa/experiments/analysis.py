"""Comparing systems and probing retrieval (used by the notebooks): paired tests between two
readers, answers side by side, and whether the counterfactual premise helps or misleads retrieval."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

from ifqa.api import Pipeline
from ifqa.artifacts import read_predictions, read_run
from ifqa.eval.answers import best_over_answers, exact_match
from ifqa.eval.passages import GoldMatcher
from ifqa.eval.summary import paired_comparison


def load_system_predictions(output: str | Path) -> dict[str, dict[str, str]]:
    """Predictions of every reader that ran: ``name -> {qid: prediction}``."""
    results = json.loads((Path(output) / "results.json").read_text())
    return {
        r["name"]: read_predictions(Path(output) / "predictions" / f"{r['name']}.jsonl")
        for r in results["readers"]
        if r["status"] == "ran"
    }


def compare(examples: list, a: dict[str, str], b: dict[str, str]) -> dict[str, Any]:
    """Paired comparison of two systems on the same questions (EM and F1)."""
    return paired_comparison(examples, a, b)


def side_by_side(examples: list, systems: dict[str, dict[str, str]], limit: int = 5, seed: int = 0) -> list[dict]:
    """A few questions with every system's answer, preferring ones where the systems disagree."""
    rows = []
    for example in examples:
        answers = {name: predictions.get(example.qid, "") for name, predictions in systems.items()}
        correct = {
            name: bool(best_over_answers(exact_match, answer, example.answers)) for name, answer in answers.items()
        }
        rows.append(
            {
                "qid": example.qid,
                "question": example.question,
                "gold": " | ".join(example.answers),
                **{name: f"{answer} {'✓' if correct[name] else '✗'}" for name, answer in answers.items()},
                "_disagree": len(set(correct.values())) > 1,
            }
        )
    random.Random(seed).shuffle(rows)
    rows.sort(key=lambda row: not row["_disagree"])
    return [{k: v for k, v in row.items() if k != "_disagree"} for row in rows[:limit]]


def premise_effect(retriever, examples: list, k: int = 5) -> dict[str, Any]:
    """Does the counterfactual premise help or mislead retrieval? Gold-passage hits in the top k for
    the whole question, the main clause alone and the premise alone (the ``question``,
    ``main-clause`` and ``premise`` query modes), with the questions where the premise turned a hit
    into a miss. ``retriever``: an ``ifqa.open_index`` searcher or an engine."""

    def hits(mode: str) -> tuple[list[bool], list]:
        pipeline = Pipeline(indexes=[], k=k, query_mode=mode, searchers=[retriever])
        results = pipeline.batch_search([e.question for e in examples])
        return [
            any(GoldMatcher(e.context).matches(hit.text) for hit in found) for e, found in zip(examples, results)
        ], results

    whole, whole_results = hits("question")
    main, _ = hits("main-clause")
    premise, _ = hits("premise")
    misled = [
        {"qid": e.qid, "question": e.question, "top passage (whole question)": found[0].title if found else ""}
        for e, w, m, found in zip(examples, whole, main, whole_results)
        if m and not w
    ]
    n = len(examples) or 1
    return {
        "k": k,
        "whole question": 100 * sum(whole) / n,
        "main clause only": 100 * sum(main) / n,
        "premise only": 100 * sum(premise) / n,
        "misled by the premise": misled,
        "helped by the premise": sum(1 for w, m in zip(whole, main) if w and not m),
    }


def rescued(baseline_run: str | Path, new_run: str | Path, limit: int = 5) -> dict[str, Any]:
    """Questions whose gold passage the baseline missed at rank 1 and the new run put first (and the
    reverse count): what each retrieved at the top, to read why."""

    def top(record: dict) -> dict:
        ctx = record["ctxs"][0] if record["ctxs"] else {"title": "", "text": "", "gold": False}
        return {"title": ctx.get("title", ""), "text": ctx.get("text", "")[:240], "gold": bool(ctx.get("gold"))}

    new = {r["qid"]: r for r in read_run(new_run)}
    fixed, broken = [], 0
    for record in read_run(baseline_run):
        other = new.get(record["qid"])
        if other is None:
            continue
        before, after = top(record), top(other)
        if not before["gold"] and after["gold"]:
            fixed.append({"question": record["question"], "baseline top 1": before, "new top 1": after})
        broken += before["gold"] and not after["gold"]
    return {"fixed": len(fixed), "broken": broken, "examples": fixed[:limit]}
