"""The question-agnostic control at search time: first-stage score + weight x a passage classifier's
logit, the question never read (how it is trained, and why: ``ifqa.training.control``)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from ifqa.errors import IfqaError
from ifqa.retrieval.reordering import Item, RerankerKind

SETTINGS = "passage_prior.json"
WEIGHTS = "passage_prior.npy"
N_FEATURES = 1 << 20
DEFAULT_WEIGHT = 0.5


def vectorizer():
    """Hashed word uni- and bigrams: stateless, so the classifier is only a weight vector (no pickle)."""
    from sklearn.feature_extraction.text import HashingVectorizer

    return HashingVectorizer(n_features=N_FEATURES, ngram_range=(1, 2), alternate_sign=False, norm="l2")


class PassagePriorReranker(RerankerKind):
    """First-stage score + weight x the classifier's logit for the same passage."""

    @classmethod
    def claims(cls, model: str) -> bool:
        return (Path(model) / SETTINGS).exists()

    @classmethod
    def load(cls, model: str, depth: int = 100, **options) -> PassagePriorReranker:
        """The control reads no device, batch or backend setting: it is one sparse product per list.
        A backend or precision asked for is refused rather than silently ignored."""
        if (options.get("backend") or "torch") != "torch" or (options.get("precision") or "auto") != "auto":
            raise IfqaError(
                "the question-agnostic control runs no neural model: --backend, --quantize and --precision "
                "do not apply to it; leave them out",
                model,
            )
        return cls(model, depth)

    def __init__(self, folder: str | Path, depth: int = 100):
        folder = Path(folder)
        try:
            self.info = json.loads((folder / SETTINGS).read_text())
            self.weights = np.load(folder / WEIGHTS, allow_pickle=False)
        except (OSError, ValueError) as exc:
            raise IfqaError(f"not a passage-prior control ({exc})", folder) from None
        if self.weights.shape != (self.info.get("n_features"),):
            raise IfqaError("passage_prior.npy does not match passage_prior.json", folder)
        self.name, self.depth = str(folder), depth

    def describe(self) -> dict:
        return {"model": self.name, "kind": "passage-prior (question-agnostic control)", "depth": self.depth}

    def prior(self, texts: Sequence[str]) -> np.ndarray:
        return vectorizer().transform(list(texts)) @ self.weights + self.info["intercept"]

    def score_many(self, items: Sequence[Item]) -> list[list[float]]:
        """First-stage score plus the weighted passage prior; the questions are never read."""
        texts = [text for _, item_texts, _ in items for text in item_texts]
        prior = self.prior(texts).tolist() if texts else []
        out, start = [], 0
        for _, item_texts, first_scores in items:
            head = prior[start : start + len(item_texts)]
            start += len(item_texts)
            out.append([float(s) + self.info["weight"] * float(p) for s, p in zip(first_scores, head)])
        return out
