"""Batches prepared ahead of a model (``ifqa.feeding``): by worker processes or by threads, pinned, in
order, within the shared memory, leaving signals to the parent; outputs copied back from the GPU
they are on."""

import os
import signal
import threading

import pytest
import torch

from ifqa import feeding
from tests.fake_cuda import FakeCuda, on_gpu
from tests.signals import DEFAULTS, signal_handlers


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
    with signal_handlers(DEFAULTS):  # the parent's, as a shell with job control leaves them
        flags = [f["ignored"].tolist() for f in feeding.feed([[1], [2], [3]], _signals, "cpu", workers=2)]
        assert flags == [[False, False]] + [[True, True]] * 2  # the first item is the parent's own (measured there)
        assert signal.getsignal(signal.SIGTERM) != signal.SIG_IGN  # the parent's own handlers are untouched
    assert os.environ["TOKENIZERS_PARALLELISM"] == "true"  # set off only while the workers fork


def _sized(batch: list[int]) -> dict:
    return {"x": torch.zeros(batch[0], dtype=torch.int64)}  # batch[0] x 8 bytes


def test_what_workers_keep_in_flight_fits_the_shared_memory(monkeypatch):
    """8 workers x 4 batches ahead would not fit a container's small /dev/shm (bus error): what is in
    flight is sized to half the free shared memory, and a batch that cannot fit at all is one line
    before any batch is handed over."""
    assert feeding.shared_memory_free("/no/such/folder") is None
    assert feeding.in_flight(1000, 8, None) == (8, feeding.PREFETCH)  # nothing known: as before
    assert feeding.in_flight(1000, 8, 10**9) == (8, feeding.PREFETCH)
    assert feeding.in_flight(1000, 8, 8000) == (4, 1)  # 4 batches fit in half of it
    assert feeding.in_flight(1000, 2, 12_000) == (2, 3)
    assert feeding.in_flight(1000, 8, 1500) == (1, 1)  # one batch fits, not two: one worker, one ahead
    seen = []
    monkeypatch.setattr(feeding, "shared_memory_free", lambda path=feeding.SHARED_MEMORY: 4 * 8 * 100)
    real_in_flight = feeding.in_flight
    monkeypatch.setattr(feeding, "in_flight", lambda *args: seen.append(real_in_flight(*args)) or seen[-1])
    work = [[100], [90], [80], [70], [60]]
    assert [f["x"].numel() for f in feeding.feed(work, _sized, "cpu", workers=2)] == [100, 90, 80, 70, 60]
    assert seen == [(2, 1)]  # the first (longest) batch measured: 800 bytes, 4 of them fit in 3,200
    monkeypatch.setattr(feeding, "shared_memory_free", lambda path=feeding.SHARED_MEMORY: 500)
    with pytest.raises(feeding.IfqaError, match=r"does not fit the 0.0 MB free in /dev/shm.*lower --batch-size"):
        next(feeding.feed(work, _sized, "cpu", workers=2))


def test_without_workers_a_gpu_is_fed_by_threads_ahead_pinned_and_in_order(monkeypatch):
    """No worker processes on CUDA (a tokenizer whose batch call runs its own threads): batches are
    prepared ahead on threads, a bounded number at a time, pinned, and come back in order."""
    FakeCuda(count=1).install(monkeypatch)
    pinned, prepared, taken = [], [], []
    monkeypatch.setattr(torch.Tensor, "pin_memory", lambda self: pinned.append(1) or self)

    def prepare(batch: list[int]) -> dict:
        prepared.append(batch[0])
        return {"x": torch.tensor(batch), "note": "kept"}

    work = [[i, i + 1] for i in range(20)]
    for item in feeding.feed(work, prepare, "cuda", workers=0):
        assert len(prepared) - len(taken) <= feeding.PREFETCH + feeding.THREADS_AHEAD
        taken.append(item)
    assert [t["x"].tolist() for t in taken] == work and {t["note"] for t in taken} == {"kept"}
    assert len(pinned) == len(work)
    pinned.clear()  # an item of several batches (a dense index's chunk): every tensor of each pinned
    assert len(list(feeding.feed([[1, 2], [3]], _planned, "cuda", workers=0))) == 2 and len(pinned) == 3 * 5
    monkeypatch.setenv(feeding.WORKERS_ENV, "0")  # no workers for a caller that did not vouch for threads:
    threads = set(feeding.feed(work, lambda batch: threading.get_ident(), "cuda"))
    assert threads == {threading.get_ident()}  # its prepare runs on the calling thread, never on two at once
    monkeypatch.setenv(feeding.WORKERS_ENV, "3")  # the user's count wins on CUDA
    assert feeding.default_workers("cuda", 0) == 3 and feeding.default_workers("cpu", 0) == 3  # any device
    monkeypatch.delenv(feeding.WORKERS_ENV)
    assert feeding.default_workers("cpu") == 0 and feeding.default_workers("cuda", 0) == 0
    monkeypatch.setenv(feeding.WORKERS_ENV, "3")
    monkeypatch.setenv(feeding.WORKERS_ENV, "many")
    with pytest.raises(feeding.IfqaError, match="IFQA_FEED_WORKERS='many'"):
        feeding.default_workers("cuda")


def _mixed(batch: list[int]) -> dict:
    n = batch[0]
    return {
        "input_ids": torch.arange(n * 3).reshape(n, 3),
        "note": f"batch {n}",
        "absent": None,  # a value a batch may leave empty
        "scores": torch.linspace(0, 1, n),
        "attention_mask": torch.ones(n, 3, dtype=torch.int64),
        "labels": torch.full((n, 2), -100),
        "flags": torch.zeros(n, 3, dtype=torch.bool),
    }


def _storages(value) -> dict:
    """The storages behind an item's tensors, by dtype."""
    if isinstance(value, torch.Tensor):
        return {value.dtype: {value.untyped_storage().data_ptr()}}
    parts = value.values() if isinstance(value, dict) else value if isinstance(value, (list, tuple)) else []
    found: dict = {}
    for part in parts:
        for dtype, pointers in _storages(part).items():
            found.setdefault(dtype, set()).update(pointers)
    return found


def test_a_worker_hands_each_item_over_as_one_buffer_per_dtype():
    """The parent's share of a worker's item is mostly the handoff of each tensor: an item's tensors of
    one dtype arrive as views of one buffer, whatever their shapes, and the batch equals the one prepared
    here, key order, dtypes and the values that are no tensors included."""
    work = [[n] for n in (4, 3, 2, 1)]
    for n, (batch, fed) in enumerate(zip(work, feeding.feed(work, _mixed, "cpu", workers=2), strict=True)):
        expected = _mixed(batch)
        assert list(fed) == list(expected) and fed["note"] == expected["note"] and fed["absent"] is None
        for key, value in expected.items():
            if isinstance(value, torch.Tensor):
                assert fed[key].dtype == value.dtype and torch.equal(fed[key], value), key
        if n == 0:  # prepared in the calling process (to be measured), served as it is: nothing crossed
            continue
        storages = _storages(fed)
        assert set(storages) == {torch.int64, torch.float32, torch.bool}
        assert all(len(pointers) == 1 for pointers in storages.values()), storages  # labels with input_ids
        assert len(set().union(*storages.values())) == 3


def test_no_item_is_prepared_twice_when_workers_feed():
    """The first item is prepared in the calling process to size what the workers keep in flight, and
    served from there: the workers start at the second (a dense index's item is a whole chunk)."""
    import multiprocessing

    calls = multiprocessing.Manager().list()

    def prepare(batch: list[int]) -> dict:
        calls.append(batch[0])
        return {"x": torch.tensor(batch)}

    work = [[n] for n in range(6)]
    assert [fed["x"].tolist() for fed in feeding.feed(work, prepare, "cpu", workers=2)] == work
    assert sorted(calls) == list(range(6))


def _planned(item: list[int]) -> list[tuple[list[int], dict]]:
    """An item prepared as several batches, as a dense index's chunk is (positions, inputs)."""
    return [([n, n + 10], _mixed([n])) for n in item]


@pytest.mark.parametrize("workers", [0, 2])
def test_an_item_of_several_batches_arrives_whole_each_batch_in_one_buffer(workers):
    work = [[3, 1], [2], [4, 2, 1]]
    fed = list(feeding.feed(work, _planned, "cpu", workers=workers))
    assert len(fed) == len(work)
    for k, (item, batches) in enumerate(zip(work, fed, strict=True)):
        assert [list(positions) for positions, _ in batches] == [[n, n + 10] for n in item]
        for (_, got), (_, expected) in zip(batches, _planned(item), strict=True):
            assert list(got) == list(expected) and got["note"] == expected["note"]
            assert all(torch.equal(got[k], v) for k, v in expected.items() if isinstance(v, torch.Tensor))
        if workers and k:  # the first item is served from the calling process; the others cross whole
            assert all(len(pointers) == 1 for pointers in _storages(batches).values())
            assert isinstance(batches[0], tuple) and isinstance(batches[0][0], list)  # in the shape prepared


def test_a_crossed_item_is_pinned_one_buffer_per_dtype(monkeypatch):
    """On CUDA the DataLoader's pinning thread pins what crossed: one copy per dtype for a whole item of
    several batches, not one per tensor; what the caller gets reads from the pinned copies."""
    pinned = []
    monkeypatch.setattr(torch.Tensor, "pin_memory", lambda self, *device: pinned.append(self.dtype) or self.clone())
    item = _planned([3, 1, 2])
    packed = feeding._crossing(item).pin_memory()
    assert sorted(map(str, pinned)) == sorted(map(str, (torch.int64, torch.float32, torch.bool)))
    got = feeding._arrived(packed)
    assert [positions for positions, _ in got] == [positions for positions, _ in item]
    for (_, batch), (_, expected) in zip(got, item, strict=True):
        assert list(batch) == list(expected) and batch["note"] == expected["note"]
        assert all(torch.equal(batch[k], v) for k, v in expected.items() if isinstance(v, torch.Tensor))
    assert set().union(*_storages(got).values()) == set().union(*_storages(packed.buffers).values())


def test_starting_workers_leaves_the_callers_random_stream_where_it_was():
    """The workers' seeds are drawn from a generator of the feed's own: drawn from torch's global one,
    each feed's start moved the caller's dropout stream, so a resumed training run (its feed started
    again) took other masks than the uninterrupted run (FiD's losses differed from the resumed step on)."""
    torch.manual_seed(1)
    expected = torch.rand(4)
    torch.manual_seed(1)
    assert len(list(feeding.feed([[1], [2], [3]], _sized, "cpu", workers=2))) == 3
    assert torch.equal(torch.rand(4), expected)


@pytest.mark.parametrize("gpu", [0, 1, 3])
def test_outputs_from_any_gpu_are_waited_for_on_that_gpus_stream(monkeypatch, gpu):
    """An event recorded without a stream lands on the current device's (GPU 0's, when nothing set
    it): on any other GPU it completes at once and a reader (the chunk writer, the reranker) would
    read the buffer early."""
    cuda = FakeCuda(count=4).install(monkeypatch)
    vectors = torch.arange(12, dtype=torch.float32).reshape(3, 4)
    host, done = feeding.copy_back(on_gpu(vectors, gpu))
    assert cuda.events == [done.stream] and done.stream.device == gpu
    assert cuda.pinned == 1 and cuda.current == 0  # the copy's device was entered, then left
    assert torch.equal(host.as_subclass(torch.Tensor), vectors)
