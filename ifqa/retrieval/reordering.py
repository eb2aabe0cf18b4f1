"""The one reranker interface, shared by every kind (the cross-encoders of ``rerank``, the
question-agnostic control of ``control``) and every caller (the pipeline, ``ifqa rerank``, the
server, ``ifqa.Reranker``).

A reranker kind is a class with ``depth``, ``describe()`` and ``score(question, texts,
first_stage_scores)`` (optionally ``score_many`` to score several questions' pairs together);
``Reorders`` gives it ``rerank`` and ``rerank_many`` over ``Hit`` lists. Kinds are registered in
``ifqa.registry.RERANKERS`` and found by ``load_reranker``.
"""

from __future__ import annotations

from collections.abc import Sequence

from ifqa.retrieval.hits import Hit, reranked


def score_many(reranker, items: Sequence[tuple[str, Sequence[str], Sequence[float]]]) -> list[list[float]]:
    """Scores for several (question, texts, first-stage scores) at once where the reranker can batch
    them, else one question at a time."""
    if hasattr(reranker, "score_many"):
        return reranker.score_many(items)
    return [reranker.score(question, texts, first) for question, texts, first in items]


class Reorders:
    """``rerank`` and ``rerank_many`` for a class with ``depth`` and ``score``."""

    depth: int

    def rerank(self, question: str, hits: Sequence[Hit]) -> list[Hit]:
        return self.rerank_many([question], [hits])[0]

    def rerank_many(self, questions: Sequence[str], hits_lists: Sequence[Sequence[Hit]]) -> list[list[Hit]]:
        """For each question: its top ``depth`` hits in the reranker's order (with its scores), then
        the rest in their first-stage order; all questions' pairs are scored together."""
        heads = [hits[: self.depth] for hits in hits_lists]
        scores = score_many(
            self,
            [(question, [h.text for h in head], [h.score for h in head]) for question, head in zip(questions, heads)],
        )
        return [reranked(hits, values) for hits, values in zip(hits_lists, scores)]

    @classmethod
    def claims(cls, model: str) -> bool:
        """Whether ``model`` (a folder or hub id) is of this kind."""
        return False
