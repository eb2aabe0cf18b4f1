"""The one reranker interface, shared by every kind (the cross-encoders of ``rerank``, the
question-agnostic control of ``control``) and every caller (the pipeline, ``ifqa rerank``, the
server, ``ifqa.Reranker``): a kind gives one scoring method, ``score_many``, and the rest follows.
Kinds are registered in ``ifqa.registry.RERANKERS`` and found by ``rerank.load_reranker``.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterator, Sequence

from ifqa.retrieval.hits import Hit, reranked

#: What a reranker scores: (question, passage texts, their first-stage scores).
Item = tuple[str, Sequence[str], Sequence[float]]


class RerankerKind(ABC):
    """Reorders each question's top ``depth`` passages by its own scores."""

    depth: int

    @classmethod
    def claims(cls, model: str) -> bool:
        """Whether ``model`` (a folder or hub id) is of this kind."""
        return False

    @classmethod
    @abstractmethod
    def load(cls, model: str, depth: int = 100, **settings) -> RerankerKind:
        """The reranker in ``model``, re-scoring ``depth`` passages per question."""

    @abstractmethod
    def describe(self) -> dict:
        """What makes the scores, as a run's manifest records it."""

    @abstractmethod
    def score_many(self, items: Sequence[Item]) -> list[list[float]]:
        """One score per text of each item, all items scored together."""

    def score_groups(self, groups: Sequence[Sequence[Item]]) -> Iterator[list[list[float]]]:
        """``score_many`` for each group in turn, yielded as each finishes (a kind may overlap them)."""
        for items in groups:
            yield self.score_many(items)

    def score(self, question: str, texts: Sequence[str], first_scores: Sequence[float] = ()) -> list[float]:
        return self.score_many([(question, texts, first_scores or [0.0] * len(texts))])[0]

    def rerank(self, question: str, hits: Sequence[Hit]) -> list[Hit]:
        return self.rerank_many([question], [hits])[0]

    def rerank_many(self, questions: Sequence[str], hits_lists: Sequence[Sequence[Hit]]) -> list[list[Hit]]:
        """For each question: its top ``depth`` hits in the reranker's order (with its scores), then
        the rest in their first-stage order; all questions' pairs are scored together."""
        heads = [hits[: self.depth] for hits in hits_lists]
        scores = self.score_many(
            [(question, [h.text for h in head], [h.score for h in head]) for question, head in zip(questions, heads)]
        )
        return [reranked(hits, values) for hits, values in zip(hits_lists, scores)]
