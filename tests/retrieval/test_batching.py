"""Length-planned batches fed by worker processes (the CPU side of GPU inference), on a toy model."""

import os
import signal

import pytest
import torch

from ifqa.retrieval import batching


def _prepare(batch: list[int]) -> dict:
    return {"x": torch.tensor(batch)}


def _model(features: dict):
    return features["x"].float() * 2


@pytest.mark.parametrize("workers", [0, 2])
def test_groups_come_back_each_in_its_items_order(monkeypatch, workers):
    monkeypatch.setattr(batching, "default_workers", lambda device: workers)
    groups = [[5, 1, 4], [], [9, 2, 6, 3, 8, 7], [0]]
    lengths = [[len(str(i)) * (i % 3 + 1) for i in group] for group in groups]
    outputs = list(batching.run_planned_groups(groups, lengths, 2, _prepare, _model, "cpu"))
    assert outputs[1] is None
    assert [o.tolist() for i, o in enumerate(outputs) if i != 1] == [[2 * x for x in g] for g in groups if g]
    assert batching.run_planned(groups[2], lengths[2], 4, _prepare, _model, "cpu").tolist() == [18, 4, 12, 6, 16, 14]


def _signals(batch: list[int]) -> dict:
    return {"ignored": torch.tensor([signal.getsignal(signal.SIGTERM) == signal.SIG_IGN,
                                     signal.getsignal(signal.SIGINT) == signal.SIG_IGN])}


def test_workers_leave_ctrl_c_and_sigterm_to_the_parent(monkeypatch):
    """A signal sent to the whole process group must not kill a worker mid-batch: the parent stops at a
    whole step and ends its workers itself."""
    monkeypatch.setenv("TOKENIZERS_PARALLELISM", "true")
    flags = [f["ignored"].tolist() for f in batching.feed([[1], [2], [3]], _signals, "cpu", workers=2)]
    assert flags == [[True, True]] * 3
    assert signal.getsignal(signal.SIGTERM) != signal.SIG_IGN  # the parent's own handlers are untouched
    assert os.environ["TOKENIZERS_PARALLELISM"] == "true"  # set off only while the workers fork
