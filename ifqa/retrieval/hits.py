"""The ranked passage: what searchers, the pipeline, rerankers, the server and run records share.

Inside an engine and during fusion a result is a passage position and a score (``index.Positions``,
cheap to merge); once a list is final it becomes ``Hit`` objects, read from the collection once.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import TypeVar

T = TypeVar("T")


@dataclass(frozen=True)
class Hit:
    """One retrieved passage: what pyserini calls a hit (``docid`` is ``id`` here)."""

    id: str
    title: str
    text: str
    score: float
    rank: int

    def as_context(self) -> dict:
        """The run-file form (``{"id", "title", "text", "score"}``)."""
        return {"id": self.id, "title": self.title, "text": self.text, "score": round(self.score, 6)}


def hits_at(positions: Sequence[tuple[int, float]], passage: Callable[[int], dict]) -> list[Hit]:
    """``Hit`` objects for an engine's ``(position, score)`` list, ranked from 1."""
    records = [(passage(position), score) for position, score in positions]
    return [Hit(r["id"], r["title"], r["text"], float(s), rank) for rank, (r, s) in enumerate(records, start=1)]


def reorder(items: Sequence[T], scores: Sequence[float], rescored: Callable[[T, float], T]) -> list[T]:
    """The first ``len(scores)`` items by their new scores (best first, ties in their old order),
    then the rest as they were: how every reranker reorders a list, whatever its items are."""
    head = sorted(zip(items[: len(scores)], scores), key=lambda pair: -pair[1])
    return [rescored(item, float(score)) for item, score in head] + list(items[len(scores) :])


def reranked(hits: Sequence[Hit], scores: Sequence[float]) -> list[Hit]:
    """``reorder`` for ``Hit`` lists: the head takes the reranker's scores, ranks are renumbered."""
    ordered = reorder(hits, scores, lambda hit, score: replace(hit, score=score))
    return [replace(hit, rank=rank) for rank, hit in enumerate(ordered, start=1)]
