"""Batches prepared ahead of a GPU: the CPU side of running a model on one, shared by inference and
training. ``feed`` prepares each item of a plan ahead, by worker processes or by threads (for a
preparation that releases the GIL), pinned for a copy that does not block; ``to_device`` copies a
prepared batch; ``copy_back`` brings outputs back without blocking; ``out_of_memory_hint`` turns a GPU
out of memory into one line. What a batch holds
is the caller's: retrieval plans batches by length (``retrieval/batching.py``), training by step."""

from __future__ import annotations

import contextlib
import math
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from ifqa.devices import is_cuda
from ifqa.errors import IfqaError

WORKERS_ENV = "IFQA_FEED_WORKERS"


def default_workers(device: str, asked: int | None = None) -> int:
    """Preparing processes: ``IFQA_FEED_WORKERS=N`` when set, on any device, whatever the caller asks (0: in
    the calling process; see ``feed``; on a CPU they share the cores with the model, as the user chose);
    else none on a CPU (they would take the cores the model uses); on CUDA ``asked`` (0 from a caller
    whose preparing parallelizes itself: ``tokens.BatchTokens``), else several, where one tokenizing
    thread fed the H100 half of what it could take. Only where ``fork`` exists: the work and its
    tokenizer reach the workers without pickling."""
    if sys.platform != "linux":
        return 0
    value = os.environ.get(WORKERS_ENV, "")
    if value:
        if not value.isdigit():
            raise IfqaError(f"{WORKERS_ENV}={value!r}: a number of worker processes (0 or more)")
        return int(value)
    if not is_cuda(device):
        return 0
    return asked if asked is not None else max(1, min(8, (os.cpu_count() or 2) - 2))


class _Prepared:
    """A map-style dataset: item i is ``prepare(work[i])``."""

    def __init__(self, work: Sequence, prepare: Callable[[Any], Any]):
        self.work, self.prepare = work, prepare

    def __len__(self) -> int:
        return len(self.work)

    def __getitem__(self, i: int):
        return _crossing(self.prepare(self.work[i]))


def _crossing(prepared: Any) -> Any:
    """What crosses from a worker: the item packed (``_Packed``)."""
    return _Packed(prepared)


def _arrived(crossed: Any) -> Any:
    """A prepared item as the worker made it."""
    return crossed.unpacked() if isinstance(crossed, _Packed) else crossed


class _Packed:
    """A prepared item as it crosses from a worker to the parent: every tensor in it (a batch's, or each of
    several batches') laid end to end in one flat buffer per dtype, the rest kept as it is, so the item
    crosses in one shared-memory handoff per dtype. A handoff costs the parent about the same whatever the
    tensor's size, and it is most of the parent's share of the feed (``benchmarks/feed_handoff.py``); the
    parent gets views of the buffers, in the item's own shape (tuples and lists, dicts in their key order)."""

    def __init__(self, prepared: Any):
        import torch

        parts: dict = {}  # dtype: (its tensors flattened, their elements so far)
        self.layout = _laid(prepared, parts, torch.Tensor)
        self.buffers = {dtype: torch.cat(flat) for dtype, (flat, _) in parts.items()}

    def pin_memory(self, _device=None) -> _Packed:  # the DataLoader's pinning thread calls it, on CUDA
        self.buffers = {dtype: buffer.pin_memory() for dtype, buffer in self.buffers.items()}
        return self

    def unpacked(self) -> Any:
        """The item, each tensor a view of its dtype's buffer."""
        return self._unlaid(self.layout)

    def _unlaid(self, value: Any) -> Any:
        if isinstance(value, _Place):
            flat = self.buffers[value.dtype]
            return flat[value.offset : value.offset + math.prod(value.shape)].view(value.shape)
        if isinstance(value, dict):
            return {key: self._unlaid(part) for key, part in value.items()}
        if isinstance(value, (list, tuple)):
            return _rebuilt(value, [self._unlaid(part) for part in value])
        return value


@dataclass(frozen=True)
class _Place:
    """Where a packed tensor lies in its dtype's buffer."""

    dtype: Any
    offset: int
    shape: tuple


def _laid(value: Any, parts: dict, tensor: type) -> Any:
    """``value`` with each tensor replaced by its place (``_Place``) in its dtype's buffer, the tensor
    flattened into ``parts``."""
    if isinstance(value, tensor):
        flat, size = parts.setdefault(value.dtype, ([], [0]))
        flat.append(value.reshape(-1))
        size[0] += value.numel()
        return _Place(value.dtype, size[0] - value.numel(), tuple(value.shape))
    if isinstance(value, dict):
        return {key: _laid(part, parts, tensor) for key, part in value.items()}
    if isinstance(value, (list, tuple)):
        return _rebuilt(value, [_laid(part, parts, tensor) for part in value])
    return value


def _rebuilt(like: list | tuple, parts: list) -> list | tuple:
    """``parts`` as a sequence of ``like``'s own type (a named tuple's fields by position)."""
    if isinstance(like, list):
        return parts
    return type(like)(*parts) if hasattr(like, "_fields") else type(like)(parts)


PREFETCH = 4  # batches each worker keeps ready
SHARED_MEMORY = "/dev/shm"


def shared_memory_free(path: str = SHARED_MEMORY) -> int | None:
    """Bytes free where worker processes hand their tensors to the parent (None: not known here)."""
    try:
        stat = os.statvfs(path)
    except OSError:
        return None
    return stat.f_bavail * stat.f_frsize


def _nbytes(prepared: Any) -> int:
    if isinstance(prepared, (list, tuple, dict)):
        return sum(map(_nbytes, prepared.values() if isinstance(prepared, dict) else prepared))
    return prepared.element_size() * prepared.nelement() if hasattr(prepared, "element_size") else 0


def in_flight(batch_bytes: int, workers: int, free: int | None) -> tuple[int, int]:
    """Workers and batches each keeps ready, sized so that what is in flight (workers x prefetch batches
    of ``batch_bytes``) takes at most half the free shared memory: a container's common 64 MB
    ``/dev/shm`` otherwise kills workers with a bus error. Not even one batch: one line, before any work."""
    if free is None or batch_bytes <= 0:
        return workers, PREFETCH
    if batch_bytes > free:
        raise IfqaError(
            f"a batch of {batch_bytes / 2**20:.1f} MB does not fit the {free / 2**20:.1f} MB free in "
            f"{SHARED_MEMORY}, where tokenizing workers hand batches over; lower --batch-size, or give "
            "the container more shared memory (docker run --shm-size 2g)"
        )
    slots = max(1, free // (2 * batch_bytes))
    workers = min(workers, slots)
    return workers, max(1, min(PREFETCH, slots // workers))


def feed(work: Sequence, prepare: Callable[[Any], Any], device: str, workers: int | None = None) -> Iterator:
    """``prepare(item)`` for each item of ``work`` in order, computed ahead on CUDA: by worker
    processes, or (no workers) by threads of this process, pinned, while the GPU runs.

    Threads only for a caller that asks for no workers: it vouches that ``prepare`` may run on several
    threads at once (a Hugging Face tokenizer's call changes the tokenizer's settings, so two threads
    calling one can cut each other's inputs). Without workers otherwise (``IFQA_FEED_WORKERS=0``),
    ``prepare`` runs on the calling thread.

    The first item is prepared here, where it is measured (planned batches come longest first; its size
    bounds what the workers keep in flight, ``in_flight``) and then served: the workers start at the
    second, so no item is prepared twice (a dense index's item is a whole chunk)."""
    on_threads = workers == 0
    if workers is None or is_cuda(device) or os.environ.get(WORKERS_ENV):  # else a count asked runs as asked
        workers = default_workers(device, workers)
    if len(work) < 2 or (workers == 0 and not (on_threads and is_cuda(device))):
        yield from map(prepare, work)
        return
    if workers == 0:
        yield from _ahead_on_threads(work, prepare)
        return
    import torch
    from torch.utils.data import DataLoader

    first = prepare(work[0])
    workers, prefetch = in_flight(_nbytes(first), min(workers, len(work) - 1), shared_memory_free())

    # the workers are the parallelism (a forked Rust pool can deadlock): off while they fork, then as it was,
    # so tokenizing on this process's own thread keeps its threads
    previous = os.environ.get("TOKENIZERS_PARALLELISM")
    os.environ["TOKENIZERS_PARALLELISM"] = "false"
    try:
        batches = iter(
            DataLoader(
                _Prepared(work[1:], prepare),
                batch_size=None,
                num_workers=workers,
                pin_memory=is_cuda(device),
                prefetch_factor=prefetch,
                multiprocessing_context="fork",
                worker_init_fn=_leave_signals_to_parent,
                # the workers' seeds from a generator of their own: drawn from torch's global one, they
                # moved the caller's dropout stream at every start, so a resumed training run (which starts
                # a feed again) took other dropout masks than the run it resumed would have
                generator=torch.Generator().manual_seed(0),
            )
        )
    finally:
        if previous is None:
            os.environ.pop("TOKENIZERS_PARALLELISM", None)
        else:
            os.environ["TOKENIZERS_PARALLELISM"] = previous
    yield _pinned(first) if is_cuda(device) else first
    yield from map(_arrived, batches)


THREADS_AHEAD = 2  # threads preparing batches ahead of the GPU (a fast tokenizer's own threads do the rest)


def _ahead_on_threads(work: Sequence, prepare: Callable[[Any], Any]) -> Iterator:
    """``prepare`` over ``work`` in order, ``PREFETCH`` items ahead on threads, each result pinned for a
    copy that does not block: for a ``prepare`` that releases the GIL (the Rust tokenizer's batch call),
    no worker processes to start or hand tensors through shared memory."""
    from collections import deque
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(THREADS_AHEAD, thread_name_prefix="feed") as pool:
        pending: deque = deque()
        items = iter(work)
        try:
            for item in items:
                pending.append(pool.submit(lambda work_item: _pinned(prepare(work_item)), item))
                if len(pending) > PREFETCH:
                    yield pending.popleft().result()
            while pending:
                yield pending.popleft().result()
        finally:
            for future in pending:
                future.cancel()


def _pinned(prepared: Any) -> Any:
    """A prepared item with its tensors pinned (a batch, or a list or tuple of them), for a copy that does not block."""
    if isinstance(prepared, dict):
        return {k: v.pin_memory() if hasattr(v, "pin_memory") else v for k, v in prepared.items()}
    if isinstance(prepared, (list, tuple)):
        return _rebuilt(prepared, [_pinned(part) for part in prepared])
    return prepared


def _leave_signals_to_parent(_worker: int) -> None:
    """A worker ignores Ctrl-C and SIGTERM: sent to the whole process group (a terminal, a scheduler),
    they would kill it mid-batch and the parent would fail with a dead worker instead of stopping at
    a whole step; the parent stops and ends its workers itself."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)


def to_device(features: dict, device: str) -> dict:
    return {
        key: value.to(device, non_blocking=True) if hasattr(value, "to") else value for key, value in features.items()
    }


def copy_back(vectors) -> tuple:
    """fp32 vectors on the host, copied without blocking from a GPU (with the event that says when the
    copy is done), or at once from a CPU.

    The copy is queued on the stream of the vectors' own device, and the event recorded on that same
    stream: an event recorded without a stream lands on the *current* device's stream, which on any
    GPU but the current one is idle, so it would complete at once and a reader would read the buffer
    before the copy lands (zeros or the previous batch's values: finite, so no check would catch them)."""
    import torch

    vectors = vectors.float()
    if vectors.device.type != "cuda":
        return vectors.cpu(), None
    stream = torch.cuda.current_stream(vectors.device)
    with torch.cuda.stream(stream):
        host = torch.empty(vectors.shape, dtype=torch.float32, pin_memory=True)
        host.copy_(vectors, non_blocking=True)
    done = torch.cuda.Event()
    done.record(stream)
    return host, done


@contextlib.contextmanager
def out_of_memory_hint(what: str, option: str = "--batch-size", kept: str = "") -> Iterator[None]:
    """A GPU out of memory becomes one line that names the batch size to lower."""
    try:
        yield
    except Exception as exc:
        if type(exc).__name__ != "OutOfMemoryError":
            raise
        import torch

        torch.cuda.empty_cache()  # the current device's cache: the loops that run on a GPU enter theirs
        raise IfqaError(f"the GPU ran out of memory on {what}; lower {option}{kept}") from None
