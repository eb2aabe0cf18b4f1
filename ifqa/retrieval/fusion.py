"""Hybrid ranking: combine several retrievers' lists for the same query.

RRF (Cormack et al., 2009) needs no score calibration: score = sum of weight / (k + rank).
Linear fusion min-max normalizes each list's scores and adds them with weights.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ifqa.retrieval.index import Positions

RRF_K = 60


def reciprocal_rank(lists: Sequence[Positions], k: int, weights: Sequence[float] | None = None) -> Positions:
    weights = weights or [1.0] * len(lists)
    scores: dict[int, float] = {}
    for weight, hits in zip(weights, lists):
        for rank, (doc, _) in enumerate(hits, start=1):
            scores[doc] = scores.get(doc, 0.0) + weight / (RRF_K + rank)
    return _top(scores, k)


def linear(lists: Sequence[Positions], k: int, weights: Sequence[float] | None = None) -> Positions:
    weights = weights or [1.0] * len(lists)
    scores: dict[int, float] = {}
    for weight, hits in zip(weights, lists):
        if not hits:
            continue
        values = [score for _, score in hits]
        low, high = min(values), max(values)
        for doc, score in hits:
            normalized = (score - low) / (high - low) if high > low else 1.0
            scores[doc] = scores.get(doc, 0.0) + weight * normalized
    return _top(scores, k)


def _top(scores: dict[int, float], k: int) -> Positions:
    ranked = sorted(scores.items(), key=lambda item: (-item[1], item[0]))  # ties broken by position: deterministic
    return [(doc, float(score)) for doc, score in ranked[:k]]


FUSIONS = {"rrf": reciprocal_rank, "linear": linear}
