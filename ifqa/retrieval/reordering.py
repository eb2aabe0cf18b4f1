"""Reordering a first stage's hits by a reranker's scores: what every reranker shares (the
cross-encoders of ``rerank`` and the question-agnostic control of ``control``).

A reranker here is an object with ``depth`` and ``score(question, texts, first_stage_scores)``
(optionally ``score_many`` to score several questions' pairs together); ``Reorders`` gives it
``rerank`` and ``rerank_many``.
"""

from __future__ import annotations

from collections.abc import Sequence

from ifqa.retrieval.index import Hits


def score_many(reranker, items: Sequence[tuple[str, Sequence[str], Sequence[float]]]) -> list[list[float]]:
    """Scores for several (question, texts, first-stage scores) at once where the reranker can batch
    them, else one question at a time."""
    if hasattr(reranker, "score_many"):
        return reranker.score_many(items)
    return [reranker.score(question, texts, first) for question, texts, first in items]


def rerank_many(reranker, questions: Sequence[str], hits_lists: Sequence[Hits], passages) -> list[Hits]:
    """For each question: its top ``depth`` hits in the reranker's order, then the rest in their
    first-stage order; all questions' pairs are scored together."""
    heads = [hits[: reranker.depth] for hits in hits_lists]
    scores = score_many(
        reranker,
        [
            (question, [passages[position]["text"] for position, _ in head], [s for _, s in head])
            for question, head in zip(questions, heads)
        ],
    )
    out = []
    for hits, head, values in zip(hits_lists, heads, scores):
        ranked = sorted(zip(head, values), key=lambda pair: -pair[1])
        out.append([(position, score) for (position, _), score in ranked] + list(hits[reranker.depth :]))
    return out


def rerank_hits(reranker, question: str, hits: Hits, passages) -> Hits:
    """``rerank_many`` for one question."""
    return rerank_many(reranker, [question], [hits], passages)[0]


class Reorders:
    """``rerank`` and ``rerank_many`` for a class with ``depth`` and ``score``."""

    def rerank(self, question: str, hits: Hits, passages) -> Hits:
        return rerank_hits(self, question, hits, passages)

    def rerank_many(self, questions: Sequence[str], hits_lists: Sequence[Hits], passages) -> list[Hits]:
        return rerank_many(self, questions, hits_lists, passages)
