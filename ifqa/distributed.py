"""Data parallelism on ``torch.distributed``: the world a launcher (``torchrun``, SLURM's ``srun``)
started this process in, and what training and reading need of it.

Every rank takes its equal share of each global batch, DistributedDataParallel all-reduces the
gradients, and every rank takes the same optimizer step; rank 0 alone writes (checkpoints, logs,
cards, progress). Without a launcher the world is one process and nothing here touches
``torch.distributed``: a plain ``ifqa train ...`` runs exactly as before. The process group times
out after ``IFQA_DIST_TIMEOUT`` seconds (default 60), so a rank that died never leaves the others
waiting at a collective.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from ifqa.errors import IfqaError

log = logging.getLogger(__name__)

TIMEOUT_ENV = "IFQA_DIST_TIMEOUT"
_STARTED: list[bool] = []  # whether this process joined the group itself (and so leaves it)
BACKEND_ENV = "IFQA_DIST_BACKEND"


@dataclass(frozen=True)
class World:
    """This process's place among the ranks (one rank, rank 0, without a launcher)."""

    rank: int = 0
    size: int = 1
    local_rank: int = 0

    @property
    def main(self) -> bool:
        """The one rank that writes."""
        return self.rank == 0

    @property
    def active(self) -> bool:
        return self.size > 1

    def share(self, items: Sequence, what: str = "--batch-size") -> list:
        """This rank's equal, contiguous share of a global batch (all of it for one rank)."""
        if not self.active:
            return list(items)
        if len(items) % self.size:
            raise IfqaError(f"{what} {len(items)} is a global batch: {self.size} ranks need a multiple of {self.size}")
        size = len(items) // self.size
        return list(items[self.rank * size : (self.rank + 1) * size])

    def blocks(self, n: int, block: int) -> range:
        """This rank's contiguous run of whole blocks of ``block`` items out of ``n`` (reading shares
        whole generation batches, so every batch is the one a single process forms)."""
        blocks = -(-n // block)
        first, last = blocks * self.rank // self.size, blocks * (self.rank + 1) // self.size
        return range(min(n, first * block), min(n, last * block))


def _int(name: str) -> int | None:
    value = os.environ.get(name)
    return int(value) if value and value.lstrip("-").isdigit() else None


def launched() -> World:
    """The world a launcher set up: torchrun's RANK/WORLD_SIZE/LOCAL_RANK, else an ``srun`` step's
    SLURM_PROCID/SLURM_STEP_NUM_TASKS/SLURM_LOCALID (a batch script's own shell is no step of several
    tasks), else one process."""
    if _int("WORLD_SIZE") and _int("RANK") is not None:
        return World(_int("RANK") or 0, _int("WORLD_SIZE") or 1, _int("LOCAL_RANK") or 0)
    tasks = _int("SLURM_STEP_NUM_TASKS")
    if tasks and tasks > 1 and _int("SLURM_PROCID") is not None:
        return World(_int("SLURM_PROCID") or 0, tasks, _int("SLURM_LOCALID") or 0)
    return World()


def first_host(nodelist: str) -> str:
    """The first host of a SLURM node list (``gpu[03-05,9],cpu1`` -> ``gpu03``)."""
    match = re.match(r"([^,\[]+)(?:\[([^\]]+)\])?", nodelist.strip())
    if not match:
        raise IfqaError(f"cannot read the SLURM node list {nodelist!r}; set MASTER_ADDR")
    prefix, ranges = match.groups()
    return prefix + (ranges.split(",")[0].split("-")[0] if ranges else "")


def pick_device(requested: str | None, world: World) -> str:
    """The device of this rank: its own GPU (``cuda:LOCAL_RANK``) where the launcher gave ranks GPUs,
    else the CPU. A ``--device`` that contradicts the launch is one line before any work."""
    from ifqa import devices

    if not world.active:
        return devices.pick_device(requested)
    import torch

    gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if requested == "cpu" and gpus:
        raise IfqaError(
            f"--device cpu, but the launcher gave rank {world.rank} a GPU; leave out --device, or hide "
            "the GPUs (CUDA_VISIBLE_DEVICES=) to train on CPUs"
        )
    if requested and requested.startswith("cuda") and world.local_rank >= gpus:
        raise IfqaError(
            f"--device {requested}: rank {world.rank} (local rank {world.local_rank}) has no GPU of its own "
            f"on this node ({gpus} visible); start at most {gpus} ranks per node, or train on CPUs"
        )
    if requested and not re.fullmatch(r"cpu|cuda(:\d+)?", requested):
        raise IfqaError(f"--device {requested!r}: ranks train on cpu or cuda")
    if gpus and world.local_rank < gpus:
        torch.cuda.set_device(world.local_rank)
        return f"cuda:{world.local_rank}"
    return "cpu"


def start(device: str) -> None:
    """Join the process group (gloo on CPUs, NCCL on GPUs) unless already joined; one line for a
    backend this machine cannot run."""
    import datetime

    import torch.distributed as dist

    if dist.is_initialized():
        return
    world = launched()
    backend = os.environ.get(BACKEND_ENV) or ("nccl" if device.startswith("cuda") else "gloo")
    if backend == "nccl" and not device.startswith("cuda"):
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
    timeout = datetime.timedelta(seconds=float(os.environ.get(TIMEOUT_ENV) or 60))
    address, port = os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"])
    if os.environ.get("TORCHELASTIC_USE_AGENT_STORE") == "True":  # torchrun's agent hosts the store
        store = dist.TCPStore(address, port, world.size, is_master=False, timeout=timeout)
    else:
        store = dist.TCPStore(address, port, world.size, is_master=world.rank == 0, timeout=timeout, multi_tenant=True)
    # keys of each restart apart: a restarted rank must never read the address a dead one published
    store = dist.PrefixStore(f"ifqa/attempt-{os.environ.get('TORCHELASTIC_RESTART_COUNT', '0')}", store)
    dist.init_process_group(backend, store=store, rank=world.rank, world_size=world.size, timeout=timeout)
    _STARTED.append(True)
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


def wrap(model, device: str, unused: bool = False):
    """``model`` in DistributedDataParallel (gradients all-reduced and averaged over the ranks).
    ``unused``: some parameters get no gradient (a bi-encoder's unused pooler), which DDP must look for."""
    from torch.nn.parallel import DistributedDataParallel

    return DistributedDataParallel(
        model,
        device_ids=[int(device.split(":")[1])] if device.startswith("cuda:") else None,
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
    except IfqaError:
        raise
    except (RuntimeError, OSError) as exc:
        if not world.active or not _is_collective_failure(exc):
            raise
        first = next((line.strip() for line in str(exc).splitlines() if line.strip()), type(exc).__name__)
        raise CollectiveFailure(
            f"rank {world.rank}: another rank stopped or stalled ({first[:160]}); the same command resumes "
            "from the last saved step"
        ) from None


def _is_collective_failure(exc: BaseException) -> bool:
    names = {type(exc).__name__, *(cls.__name__ for cls in type(exc).__mro__)}
    text = str(exc).lower()
    return bool(names & {"DistError", "DistBackendError", "DistNetworkError"}) or any(
        cue in text for cue in ("gloo", "nccl", "connection closed", "connection reset", "timed out", "broken pipe")
    )
