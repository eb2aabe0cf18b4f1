"""Model cards: what a trained retrieval model was trained on, how, and how it scored on dev.

``<model>/ifqa_card.json`` travels with the model folder. Dev scores are added by whoever measures
them (``ifqa train --dev-run``, the experiment runner), each under its own label.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ifqa.io import write_json

CARD = "ifqa_card.json"
FID_CONFIG = "fid.json"  # a FiD checkpoint folder's reading settings (passages, lengths), beside its weights


def read_card(model_dir: str | Path) -> dict[str, Any]:
    path = Path(model_dir) / CARD
    return json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}


def write_card(model_dir: str | Path, card: dict[str, Any]) -> None:
    write_json(Path(model_dir) / CARD, card)


def add_dev_scores(model_dir: str | Path, label: str, questions: dict, recall: dict) -> None:
    """Record gold recall@K on a dev question set (never a test set: selection happens on dev)."""
    card = read_card(model_dir)
    if not card:
        return  # not a model ifqa trained (a hub cross-encoder, say): nothing to annotate
    card.setdefault("dev", {})[label] = {"questions": questions, "gold_recall": recall}
    write_card(model_dir, card)
