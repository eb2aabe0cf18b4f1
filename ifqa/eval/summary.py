"""The scorer's reports: EM/F1 with intervals and breakdowns for predictions, recall@K for runs.

Flags stored in a run are used as they are unless the questions are given, in which case they are
recomputed (that is how a DPR or pyserini run is scored here).
"""

from __future__ import annotations

import collections
from collections.abc import Mapping, Sequence
from typing import Any

from ifqa.errors import IfqaError
from ifqa.eval.answers import QuestionScore, score_predictions
from ifqa.eval.categories import ANSWER_TYPES, QUESTION_WORDS, answer_type, question_word
from ifqa.eval.passages import RECALL_DEPTHS, GoldMatcher, flag_contexts, percent, recall_at
from ifqa.eval.significance import bootstrap_ci, paired_test

METRICS = ("em", "f1", "containment")  # per-question scores with intervals, breakdowns and paired tests


def summarize_predictions(
    examples: Sequence[Any], predictions: Mapping[str, str], compare: Mapping[str, str] | None = None
) -> dict[str, Any]:
    """The ``ifqa evaluate --predictions`` report: EM/F1 with CIs, breakdowns, optional paired test."""
    scores = score_predictions(examples, predictions)
    values = {m: [getattr(score, m) for score in scores] for m in METRICS}
    report: dict[str, Any] = {
        "n": len(scores),
        "answered": sum(score.answered for score in scores),
        "abstained": sum(score.abstained for score in scores),
        **{m: round(percent(v), 2) for m, v in values.items()},
        **{f"{m}_ci95": list(bootstrap_ci(v)) for m, v in values.items()},
        "em_lenient": round(percent([score.em_lenient for score in scores]), 2),
        "by_answer_type": _breakdown(examples, scores, lambda example: answer_type(example.answers[0]), ANSWER_TYPES),
        "by_question_word": _breakdown(
            examples, scores, lambda example: question_word(example.question), QUESTION_WORDS
        ),
        "unknown_qids": len(set(predictions) - {example.qid for example in examples}),
    }
    if compare is not None:
        other = score_predictions(examples, compare)
        test = paired_comparison(examples, predictions, compare, (scores, other))
        report["compare"] = {
            **{metric: round(percent([getattr(s, metric) for s in other]), 2) for metric in METRICS},
            **{f"{metric}_difference": test[metric] for metric in METRICS},
        }
    return report


def paired_comparison(
    examples: Sequence[Any],
    a: Mapping[str, str],
    b: Mapping[str, str],
    scores: tuple[list[QuestionScore], list[QuestionScore]] | None = None,
) -> dict[str, Any]:
    """Paired permutation test and bootstrap interval of system A minus B, for EM, F1 and containment."""
    sa, sb = scores or (score_predictions(examples, a), score_predictions(examples, b))
    return {
        metric: paired_test([getattr(s, metric) for s in sa], [getattr(s, metric) for s in sb]) for metric in METRICS
    }


def _breakdown(examples, scores, key, order) -> dict[str, dict[str, float]]:
    groups: dict[str, list[QuestionScore]] = collections.defaultdict(list)
    for example, score in zip(examples, scores):
        groups[key(example)].append(score)
    return {
        name: {
            "n": len(groups[name]),
            **{metric: round(percent([getattr(s, metric) for s in groups[name]]), 2) for metric in METRICS},
        }
        for name in order
        if groups.get(name)
    }


def summarize_run(records: Sequence[Mapping[str, Any]], examples: Sequence[Any] | None = None) -> dict[str, Any]:
    """The ``ifqa evaluate --run`` report: recall@K (gold-passage and answer), by question word too.

    Flags stored in the run are used as they are; with ``examples`` they are recomputed from the
    questions' answers and gold passages (this is how a DPR or pyserini run is scored here).
    """
    by_qid = {example.qid: example for example in examples} if examples is not None else {}
    depth = max((len(record.get("ctxs", [])) for record in records), default=0)
    depths = [k for k in RECALL_DEPTHS if k < depth] + ([depth] if depth else [])  # always up to the run's depth
    answer_hits, gold_hits, words = [], [], []
    for record in records:
        ctxs = record.get("ctxs", [])
        example = by_qid.get(str(record.get("qid")))
        if example is not None:
            flag_contexts(ctxs, example.answers, GoldMatcher(example.context))
        elif any("has_answer" not in ctx for ctx in ctxs):
            flag_contexts(ctxs, record.get("answers") or [], None)
        answer_hits.append([bool(ctx.get("has_answer")) for ctx in ctxs])
        if all("gold" in ctx for ctx in ctxs):
            gold_hits.append([bool(ctx.get("gold")) for ctx in ctxs])
        words.append(question_word(record.get("question", "")))
    report: dict[str, Any] = {"n": len(records), "depth": depth, "recall": {}}
    if gold_hits and len(gold_hits) == len(records):
        report["recall"]["gold"] = recall_at(gold_hits, depths)
    report["recall"]["answer"] = recall_at(answer_hits, depths)
    k = 20 if 20 in depths else (depths[-1] if depths else 0)
    report["answer_recall_by_question_word"] = {
        name: {
            "n": sum(w == name for w in words),
            f"recall@{k}": round(percent([float(any(h[:k])) for h, w in zip(answer_hits, words) if w == name]), 2),
        }
        for name in QUESTION_WORDS
        if name in words
    }
    return report


def gold_hits_at(records: Sequence[Mapping[str, Any]], depths: Sequence[int]) -> dict[int, list[float]]:
    """Per question, 1.0 when a gold passage is in the top k (flags as stored in the run)."""
    return {
        k: [float(any(ctx.get("gold") for ctx in record.get("ctxs", [])[:k])) for record in records] for k in depths
    }


def compare_runs(
    records: Sequence[Mapping[str, Any]], baseline: Sequence[Mapping[str, Any]], depths: Sequence[int] = (1, 5, 20)
) -> dict[str, Any]:
    """Gold recall@k of ``records`` with 95% bootstrap intervals, and the paired permutation test
    against ``baseline`` on the questions both runs hold (matched by qid)."""
    other = {str(r.get("qid")): r for r in baseline}
    mine = [r for r in records if str(r.get("qid")) in other]
    if not mine:
        raise IfqaError("the two runs share no question")
    theirs = [other[str(r.get("qid"))] for r in mine]
    deepest = min(max(len(r.get("ctxs", [])) for r in mine), max(len(r.get("ctxs", [])) for r in theirs))
    depths = [k for k in depths if k <= deepest]
    a, b = gold_hits_at(mine, depths), gold_hits_at(theirs, depths)
    return {
        "n": len(mine),
        "gold_ci95": {str(k): list(bootstrap_ci(a[k])) for k in depths},
        "vs_baseline": {str(k): paired_test(a[k], b[k]) for k in depths},
    }
