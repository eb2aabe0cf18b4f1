"""The question-agnostic control: a word classifier that scores passages *without the question*.

IfQA's gold passages come from a later dump picked by the authors' heuristics, so a plain word
classifier tells them from other passages (AUC about 0.9). Any learned retriever could pick that
cue up instead of relevance. The control measures how far the cue alone goes: each first-stage passage's
BM25 score plus ``weight`` times the classifier's logit (rank fusion moved the top too much at
any weight; the weight, 0.5, was the best of 0.1-2 on IfQA dev, so the control is an optimistic
one). A learned gain counts only above the control.

The classifier is hashed word uni- and bigrams with logistic regression (scikit-learn), trained on
the training questions' gold passages against their mined negatives; it is stored as plain JSON
and a NumPy array (no pickle), so loading a control runs no code.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path

import numpy as np

from ifqa.errors import IfqaError
from ifqa.io import atomic_write, write_json
from ifqa.retrieval.control import DEFAULT_WEIGHT, N_FEATURES, SETTINGS, WEIGHTS, vectorizer

log = logging.getLogger(__name__)


def train_control(groups, output: str | Path, seed: int = 0, weight: float = DEFAULT_WEIGHT) -> dict:
    """Fit gold-vs-negative on passages alone; returns the held-out AUC (a fifth of the questions)."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.metrics import roc_auc_score

    output = Path(output)
    texts, labels, fold = [], [], []
    for i, group in enumerate(groups):
        for text, label in [(t, 1) for t in group.positives] + [(t, 0) for t in group.negatives]:
            texts.append(text)
            labels.append(label)
            fold.append(i % 5 == 0)
    if len(set(labels)) < 2:
        raise IfqaError("the control needs both gold passages and negatives")
    started = time.time()
    features, y, held = vectorizer().transform(texts), np.array(labels), np.array(fold)
    probe = LogisticRegression(C=4.0, max_iter=2000, random_state=seed).fit(features[~held], y[~held])
    auc = float(roc_auc_score(y[held], probe.decision_function(features[held])))
    model = LogisticRegression(C=4.0, max_iter=2000, random_state=seed).fit(features, y)
    output.mkdir(parents=True, exist_ok=True)
    with atomic_write(output / WEIGHTS, "wb") as handle:
        np.save(handle, model.coef_.astype(np.float32).ravel())
    info = {
        "kind": "passage-prior",
        "weight": weight,
        "n_features": N_FEATURES,
        "ngram_range": [1, 2],
        "intercept": float(model.intercept_[0]),
        "held_out_auc": round(auc, 4),
        "passages": len(texts),
        "seconds": round(time.time() - started, 1),
    }
    write_json(output / SETTINGS, info)
    return info
