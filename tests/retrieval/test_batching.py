"""Length-planned batches fed by worker processes (the CPU side of GPU inference), on a toy model."""

import os
import signal
import threading

import pytest
import torch

from ifqa.retrieval import batching


def _prepare(batch: list[int]) -> dict:
    return {"x": torch.tensor(batch)}


def _model(features: dict):
    return features["x"].float() * 2


@pytest.mark.parametrize("workers", [0, 2])
def test_groups_come_back_each_in_its_items_order(monkeypatch, workers):
    monkeypatch.setattr(batching, "default_workers", lambda device, asked=None: workers)
    groups = [[5, 1, 4], [], [9, 2, 6, 3, 8, 7], [0]]
    lengths = [[len(str(i)) * (i % 3 + 1) for i in group] for group in groups]
    outputs = list(batching.run_planned_groups(groups, lengths, 2, _prepare, _model, "cpu"))
    assert outputs[1] is None
    assert [o.tolist() for i, o in enumerate(outputs) if i != 1] == [[2 * x for x in g] for g in groups if g]
    alone = next(batching.run_planned_groups([groups[2]], [lengths[2]], 4, _prepare, _model, "cpu"))
    assert alone.tolist() == [18, 4, 12, 6, 16, 14]


def _signals(batch: list[int]) -> dict:
    return {
        "ignored": torch.tensor(
            [signal.getsignal(signal.SIGTERM) == signal.SIG_IGN, signal.getsignal(signal.SIGINT) == signal.SIG_IGN]
        )
    }


def test_workers_leave_ctrl_c_and_sigterm_to_the_parent(monkeypatch):
    """A signal sent to the whole process group must not kill a worker mid-batch: the parent stops at a
    whole step and ends its workers itself."""
    monkeypatch.setenv("TOKENIZERS_PARALLELISM", "true")
    flags = [f["ignored"].tolist() for f in batching.feed([[1], [2], [3]], _signals, "cpu", workers=2)]
    assert flags == [[True, True]] * 3
    assert signal.getsignal(signal.SIGTERM) != signal.SIG_IGN  # the parent's own handlers are untouched
    assert os.environ["TOKENIZERS_PARALLELISM"] == "true"  # set off only while the workers fork


def _sized(batch: list[int]) -> dict:
    return {"x": torch.zeros(batch[0], dtype=torch.int64)}  # batch[0] x 8 bytes


def test_what_workers_keep_in_flight_fits_the_shared_memory(monkeypatch):
    """8 workers x 4 batches ahead would not fit a container's small /dev/shm (bus error): what is in
    flight is sized to half the free shared memory, and a batch that cannot fit at all is one line
    before any batch is handed over."""
    assert batching.shared_memory_free("/no/such/folder") is None
    assert batching.in_flight(1000, 8, None) == (8, batching.PREFETCH)  # nothing known: as before
    assert batching.in_flight(1000, 8, 10**9) == (8, batching.PREFETCH)
    assert batching.in_flight(1000, 8, 8000) == (4, 1)  # 4 batches fit in half of it
    assert batching.in_flight(1000, 2, 12_000) == (2, 3)
    assert batching.in_flight(1000, 8, 1500) == (1, 1)  # one batch fits, not two: one worker, one ahead
    seen = []
    monkeypatch.setattr(batching, "shared_memory_free", lambda path=batching.SHARED_MEMORY: 4 * 8 * 100)
    real_in_flight = batching.in_flight
    monkeypatch.setattr(batching, "in_flight", lambda *args: seen.append(real_in_flight(*args)) or seen[-1])
    work = [[100], [90], [80], [70], [60]]
    assert [f["x"].numel() for f in batching.feed(work, _sized, "cpu", workers=2)] == [100, 90, 80, 70, 60]
    assert seen == [(2, 1)]  # the first (longest) batch measured: 800 bytes, 4 of them fit in 3,200
    monkeypatch.setattr(batching, "shared_memory_free", lambda path=batching.SHARED_MEMORY: 500)
    with pytest.raises(batching.IfqaError, match=r"does not fit the 0.0 MB free in /dev/shm.*lower --batch-size"):
        next(batching.feed(work, _sized, "cpu", workers=2))


def test_without_workers_a_gpu_is_fed_by_threads_ahead_pinned_and_in_order(monkeypatch):
    """No worker processes on CUDA (a tokenizer whose batch call runs its own threads): batches are
    prepared ahead on threads, a bounded number at a time, pinned, and come back in order."""
    from tests.fake_cuda import FakeCuda

    FakeCuda(count=1).install(monkeypatch)
    pinned, prepared, taken = [], [], []
    monkeypatch.setattr(torch.Tensor, "pin_memory", lambda self: pinned.append(1) or self)

    def prepare(batch: list[int]) -> dict:
        prepared.append(batch[0])
        return {"x": torch.tensor(batch), "note": "kept"}

    work = [[i, i + 1] for i in range(20)]
    for item in batching.feed(work, prepare, "cuda", workers=0):
        assert len(prepared) - len(taken) <= batching.PREFETCH + batching.THREADS_AHEAD
        taken.append(item)
    assert [t["x"].tolist() for t in taken] == work and {t["note"] for t in taken} == {"kept"}
    assert len(pinned) == len(work)
    monkeypatch.setenv(batching.WORKERS_ENV, "0")  # no workers for a caller that did not vouch for threads:
    threads = set(batching.feed(work, lambda batch: threading.get_ident(), "cuda"))
    assert threads == {threading.get_ident()}  # its prepare runs on the calling thread, never on two at once
    monkeypatch.setenv(batching.WORKERS_ENV, "3")  # the user's count wins on CUDA
    assert batching.default_workers("cuda", 0) == 3 and batching.default_workers("cpu", 0) == 0
    monkeypatch.setenv(batching.WORKERS_ENV, "many")
    with pytest.raises(batching.IfqaError, match="IFQA_FEED_WORKERS='many'"):
        batching.default_workers("cuda")
