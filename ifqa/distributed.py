"""Data parallelism on ``torch.distributed`` for training and reading: the group a launcher's
world forms (``ifqa.launch``; a rank's device is ``devices.pick_device``'s) and rank 0 as the one
writer. Without a launcher nothing here touches ``torch.distributed``. docs/readers.md ("Training on
several GPUs") gives the rules (``IFQA_DIST_TIMEOUT``, saves waited for on the rendezvous store)."""

from __future__ import annotations

import contextlib
import functools
import logging
import os
from collections.abc import Iterator
from typing import Any

from ifqa import devices
from ifqa.devices import is_cuda
from ifqa.errors import IfqaError, first_line
from ifqa.launch import TIMEOUT_ENV, World, env_int, first_host, launched, timeout_seconds  # noqa: F401 - re-exported

log = logging.getLogger(__name__)

#: how long the other ranks wait for rank 0's save: a t5-large checkpoint on a slow network filesystem
#: takes minutes; a rank 0 that dies closes the store it hosts, which ends the wait at once
SAVE_WAIT_SECONDS = 6 * 3600
_STARTED: list = []  # the store this process's group was formed on, when it joined the group itself
_WRITES: list[int] = [0]  # saves fenced so far: every rank counts the same ones, so their keys agree
BACKEND_ENV = "IFQA_DIST_BACKEND"


def start(device: str) -> None:
    """Join the process group (gloo on CPUs, NCCL on GPUs) unless already joined; one line for a
    backend this machine cannot run."""
    import datetime

    import torch.distributed as dist

    if dist.is_initialized():
        return
    world = launched()
    if is_cuda(device):
        import torch

        torch.cuda.set_device(devices.gpu_index(device))  # NCCL and the current-device defaults follow this rank's GPU
    backend = os.environ.get(BACKEND_ENV) or ("nccl" if is_cuda(device) else "gloo")
    if backend == "nccl" and not is_cuda(device):
        raise IfqaError(
            f"{BACKEND_ENV}=nccl needs a CUDA device on every rank; rank {world.rank} runs on {device} (use gloo)"
        )
    if backend not in ("nccl", "gloo") or not dist.is_backend_available(backend):
        raise IfqaError(
            f"{BACKEND_ENV}={backend}: this torch offers "
            f"{', '.join(b for b in ('gloo', 'nccl') if dist.is_backend_available(b))}"
        )
    if "MASTER_ADDR" not in os.environ:  # srun sets no rendezvous address: the step's first node
        nodes = os.environ.get("SLURM_STEP_NODELIST") or os.environ.get("SLURM_JOB_NODELIST")
        if not nodes:
            raise IfqaError("a launched rank without MASTER_ADDR: start it with torchrun or srun, or set MASTER_ADDR")
        os.environ["MASTER_ADDR"] = first_host(nodes)
    os.environ.setdefault("MASTER_PORT", "29500")
    port = env_int("MASTER_PORT", minimum=1)
    if port is None or port > 65535:
        raise IfqaError(f"launch environment: MASTER_PORT={os.environ['MASTER_PORT']!r} is not a port (1-65535)")
    seconds = timeout_seconds()
    timeout = datetime.timedelta(seconds=seconds)
    address = os.environ["MASTER_ADDR"]
    try:
        agent = os.environ.get("TORCHELASTIC_USE_AGENT_STORE") == "True"  # torchrun's agent hosts the store
        master = world.rank == 0 and not agent
        store = dist.TCPStore(address, port, world.size, is_master=master, timeout=timeout, multi_tenant=not agent)
        # keys of each restart apart: a restarted rank must never read the address a dead one published
        store = dist.PrefixStore(f"ifqa/attempt-{os.environ.get('TORCHELASTIC_RESTART_COUNT', '0')}", store)
        dist.init_process_group(backend, store=store, rank=world.rank, world_size=world.size, timeout=timeout)
    except (RuntimeError, OSError, ValueError) as exc:  # DistStoreError, DistNetworkError, a taken port ...
        first = first_line(str(exc), 160) or type(exc).__name__
        raise IfqaError(
            f"rank {world.rank} of {world.size} could not form the process group at {address}:{port} within "
            f"{seconds:g} s ({first}); check that every rank started and MASTER_ADDR/MASTER_PORT "
            "reach rank 0"
        ) from None
    _STARTED.append(store)
    _WRITES[0] = 0
    if not world.main:  # one voice: the other ranks log errors only
        logging.getLogger("ifqa").setLevel(logging.ERROR)


def stop() -> None:
    """Leave the process group ``start`` joined (one that the caller set up is left alone)."""
    if _STARTED:
        import torch.distributed as dist

        _STARTED.clear()
        if dist.is_initialized():
            import gc

            gc.collect()  # wrappers (DistributedDataParallel) dropped by the caller release the group first
            with contextlib.suppress(RuntimeError):  # every rank is here before any tears the group down
                dist.barrier()
            dist.destroy_process_group()


@contextlib.contextmanager
def one_writer(world: World) -> Iterator[bool]:
    """Rank 0 writes inside the block (``True``), the others (``False``) wait until it is done, on the
    rendezvous store rather than at a collective: a save slower than ``IFQA_DIST_TIMEOUT`` (a large
    checkpoint on a network filesystem) then never times out the ranks that wait for it. A save that
    fails on rank 0 fails the others too, with one line."""
    if not world.active or not _STARTED:
        yield world.main
        return
    import datetime

    store = _STARTED[-1]
    _WRITES[0] += 1
    key = f"written-{_WRITES[0]}"
    if world.main:
        outcome = b"failed"
        try:
            yield True
            outcome = b"ok"
        finally:
            store.set(key, outcome)
        return
    yield False
    try:
        store.wait([key], datetime.timedelta(seconds=SAVE_WAIT_SECONDS))
        outcome = store.get(key)
    except (RuntimeError, OSError) as exc:
        raise CollectiveFailure(f"rank {world.rank}: rank 0 stopped while saving ({str(exc)[:160]})") from None
    if outcome != b"ok":
        raise CollectiveFailure(f"rank {world.rank}: rank 0's save failed; the same command resumes from the last save")


def wrap(model, device: str, unused: bool = False):
    """``model`` in DistributedDataParallel (gradients all-reduced and averaged over the ranks).
    ``unused``: some parameters get no gradient (a bi-encoder's unused pooler), which DDP must look for."""
    from torch.nn.parallel import DistributedDataParallel

    return DistributedDataParallel(
        model,
        device_ids=[devices.gpu_index(device)] if is_cuda(device) else None,
        find_unused_parameters=unused,
    )


def mean_and_stop(value, stop: bool) -> tuple[float, bool]:
    """The ranks' mean of ``value`` (a loss) and whether any rank was asked to stop: one collective a
    step, so every rank stops after the same step."""
    import torch
    import torch.distributed as dist

    summed = torch.stack([value.detach().float().reshape(()), torch.tensor(float(stop), device=value.device)])
    dist.all_reduce(summed)  # a new tensor: reducing it in place leaves the loss alone
    return float(summed[0]) / dist.get_world_size(), bool(summed[1] > 0)


@functools.cache
def _gather_rows_function():
    """An autograd function, made on first use (torch is imported lazily): every rank's rows,
    concatenated in rank order; the backward pass gives each rank the gradient of all the ranks'
    losses with respect to its own rows (all-reduced), so a loss over the gathered rows trains exactly
    as one process over the whole batch."""
    import torch
    import torch.distributed as dist

    class GatherRows(torch.autograd.Function):
        @staticmethod
        def forward(ctx, rows):
            parts = [torch.empty_like(rows) for _ in range(dist.get_world_size())]
            dist.all_gather(parts, rows.contiguous())
            ctx.rank, ctx.rows = dist.get_rank(), rows.shape[0]
            return torch.cat(parts)

        @staticmethod
        def backward(ctx, grad):
            grad = grad.contiguous().clone()
            dist.all_reduce(grad)
            return grad[ctx.rank * ctx.rows : (ctx.rank + 1) * ctx.rows]

    return GatherRows


def gather_rows(rows, world: World) -> tuple[Any, int]:
    """All ranks' ``rows`` in rank order, and where this rank's begin among them; gradients flow back
    to each rank's own rows (counts may differ between ranks)."""
    if not world.active:
        return rows, 0
    import torch
    import torch.distributed as dist

    counts = [torch.zeros(1, dtype=torch.long, device=rows.device) for _ in range(world.size)]
    dist.all_gather(counts, torch.tensor([rows.shape[0]], device=rows.device))
    counts = [int(c) for c in counts]
    most = max(counts)
    padded = torch.nn.functional.pad(rows, (0, 0, 0, most - rows.shape[0])) if rows.shape[0] < most else rows
    gathered = _gather_rows_function().apply(padded)  # without grad, its forward alone runs
    pieces = [gathered[r * most : r * most + counts[r]] for r in range(world.size)]
    return torch.cat(pieces), sum(counts[: world.rank])


def gather_objects(items: list, world: World) -> list:
    """Every rank's list, concatenated in rank order (one process: the list itself)."""
    if not world.active:
        return items
    import torch.distributed as dist

    parts: list[Any] = [None] * world.size
    dist.all_gather_object(parts, items)
    return [item for part in parts for item in part]


class CollectiveFailure(IfqaError):
    """Another rank died or stalled: this rank's state may be mid-step (its optimizer stepped, the
    step not yet counted), so nothing is saved on the way out; the last periodic save is resumed."""


@contextlib.contextmanager
def collective_errors(world: World) -> Iterator[None]:
    """A collective that fails because another rank died or hung (connection closed, timeout) is one
    line (``CollectiveFailure``); the same command resumes from the last step rank 0 saved."""
    try:
        yield
    except (RuntimeError, OSError) as exc:
        if not world.active or not _is_collective_failure(exc):
            raise
        first = first_line(str(exc), 160) or type(exc).__name__
        raise CollectiveFailure(
            f"rank {world.rank}: another rank stopped or stalled ({first}); the same command resumes "
            "from the last saved step"
        ) from None


def _is_collective_failure(exc: BaseException) -> bool:
    names = {type(exc).__name__, *(cls.__name__ for cls in type(exc).__mro__)}
    text = str(exc).lower()
    return bool(names & {"DistError", "DistBackendError", "DistNetworkError"}) or any(
        cue in text for cue in ("gloo", "nccl", "connection closed", "connection reset", "timed out", "broken pipe")
    )
