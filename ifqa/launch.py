"""The launch environment, read in one place: the world a launcher (``torchrun``, SLURM's ``srun``,
or a hand-set ``RANK``/``WORLD_SIZE``) started this process in. A contradictory or unreadable
environment is one line here, before any work; ``ifqa.distributed`` forms the group from it."""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from dataclasses import dataclass

from ifqa.errors import IfqaError

TIMEOUT_ENV = "IFQA_DIST_TIMEOUT"
DEFAULT_TIMEOUT = 1800.0


@dataclass(frozen=True)
class World:
    """This process's place among the ranks (one rank, rank 0, without a launcher)."""

    rank: int = 0
    size: int = 1
    local_rank: int = 0
    local_size: int | None = None  # ranks on this node, when the launcher says (torchrun, srun)
    gpus_per_task: bool = False  # the scheduler gave each task GPUs of its own (srun --gpus-per-task)

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


def env_int(name: str, minimum: int = 0) -> int | None:
    """An integer launch variable, None when unset; anything else is one line naming it."""
    value = os.environ.get(name)
    if value is None or value == "":
        return None
    if not re.fullmatch(r"-?\d+", value.strip()) or int(value) < minimum:
        raise IfqaError(f"launch environment: {name}={value!r} is not an integer of at least {minimum}")
    return int(value)


def timeout_seconds() -> float:
    """``IFQA_DIST_TIMEOUT``: a positive, finite number of seconds (default 1800)."""
    import math

    value = os.environ.get(TIMEOUT_ENV)
    if value is None or value == "":
        return DEFAULT_TIMEOUT
    try:
        seconds = float(value)
    except ValueError:
        seconds = math.nan
    if not math.isfinite(seconds) or seconds <= 0:
        raise IfqaError(f"{TIMEOUT_ENV}={value!r}: give a positive number of seconds (default {DEFAULT_TIMEOUT:.0f})")
    return seconds


def _tasks_on_node(spec: str | None, node: int | None) -> int | None:
    """This node's task count from SLURM's ``2(x3),1`` form (None when unreadable)."""
    counts: list[int] = []
    for part in (spec or "").split(","):
        match = re.fullmatch(r"(\d+)(?:\(x(\d+)\))?", part.strip())
        if not match:
            return None
        counts += [int(match[1])] * int(match[2] or 1)
    return counts[node or 0] if counts and (node or 0) < len(counts) else None


def launched() -> World:
    """The world a launcher set up, read here and nowhere else: torchrun's (or a hand-set)
    RANK/WORLD_SIZE/LOCAL_RANK/LOCAL_WORLD_SIZE, else an ``srun`` step's SLURM_PROCID/
    SLURM_STEP_NUM_TASKS/SLURM_LOCALID (a batch script's own shell is no step of several tasks), else
    one process. One that contradicts itself or cannot be read is one line, before any work."""
    timeout_seconds()  # an unreadable timeout is refused whether or not a group forms
    rank, size = env_int("RANK"), env_int("WORLD_SIZE", minimum=1)
    if rank is not None or size is not None:
        if rank is None or size is None:
            given = "RANK" if rank is not None else "WORLD_SIZE"
            raise IfqaError(
                f"launch environment: {given} is set but {'WORLD_SIZE' if given == 'RANK' else 'RANK'} is not; "
                "start ranks with torchrun or srun, or unset it to train as one process"
            )
        if rank >= size:
            raise IfqaError(f"launch environment: RANK={rank} is not below WORLD_SIZE={size}")
        if size == 1:
            return World()
        local_rank, local_size = env_int("LOCAL_RANK") or 0, env_int("LOCAL_WORLD_SIZE", minimum=1)
        if local_size is not None and local_rank >= local_size:
            raise IfqaError(f"launch environment: LOCAL_RANK={local_rank} is not below LOCAL_WORLD_SIZE={local_size}")
        return World(rank, size, local_rank, local_size, bool(os.environ.get("SLURM_GPUS_PER_TASK")))
    tasks = env_int("SLURM_STEP_NUM_TASKS", minimum=1)
    procid = env_int("SLURM_PROCID")
    if tasks and tasks > 1 and procid is not None:
        if procid >= tasks:
            raise IfqaError(f"launch environment: SLURM_PROCID={procid} is not below SLURM_STEP_NUM_TASKS={tasks}")
        local = _tasks_on_node(os.environ.get("SLURM_STEP_TASKS_PER_NODE"), env_int("SLURM_NODEID"))
        per_task = bool(os.environ.get("SLURM_GPUS_PER_TASK")) or os.environ.get("SLURM_GPU_BIND", "none") != "none"
        return World(procid, tasks, env_int("SLURM_LOCALID") or 0, local, per_task)
    return World()


def first_host(nodelist: str) -> str:
    """The first host of a SLURM node list (``gpu[03-05,9],cpu1`` -> ``gpu03``)."""
    match = re.match(r"([^,\[]+)(?:\[([^\]]+)\])?", nodelist.strip())
    if not match:
        raise IfqaError(f"cannot read the SLURM node list {nodelist!r}; set MASTER_ADDR")
    prefix, ranges = match.groups()
    return prefix + (ranges.split(",")[0].split("-")[0] if ranges else "")
