"""Length-planned batches of a retrieval model (``retrieval/batching.py``), fed by ``ifqa.feeding``, on a toy model."""

import pytest
import torch

from ifqa import feeding
from ifqa.retrieval import batching


def _prepare(batch: list[int]) -> dict:
    return {"x": torch.tensor(batch)}


def _model(features: dict):
    return features["x"].float() * 2


@pytest.mark.parametrize("workers", [0, 2])
def test_rows_come_back_in_their_items_order(monkeypatch, workers):
    monkeypatch.setattr(feeding, "default_workers", lambda device, asked=None: workers)
    groups = [[5, 1, 4], [], [9, 2, 6, 3, 8, 7], [0]]
    lengths = [[len(str(i)) * (i % 3 + 1) for i in group] for group in groups]
    outputs = [batching.run_planned(g, n, 2, _prepare, _model, "cpu") for g, n in zip(groups, lengths)]
    assert outputs[1] is None
    assert [o.tolist() for i, o in enumerate(outputs) if i != 1] == [[2 * x for x in g] for g in groups if g]
    alone = batching.run_planned(groups[2], lengths[2], 4, _prepare, _model, "cpu")
    assert alone.tolist() == [18, 4, 12, 6, 16, 14]
