"""Length-sorted batches fed by background workers: the CPU side of neural inference on a GPU.

A model on a GPU waits for its inputs when tokenizing, padding and Python run on the thread that
calls it (sentence-transformers' ``encode``): on an H100 that left all-MiniLM-L6-v2 at a sixth of
what the card does. Here batches are planned up front, longest first, prepared ahead (``feed``),
pinned and copied without blocking, with one synchronisation per call, not one per batch.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np

from ifqa import feeding
from ifqa.devices import entered, is_cuda


def plan(lengths: Sequence[int], batch_size: int) -> list[list[int]]:
    """Positions in batches of ``batch_size``, longest first (ties keep their order)."""
    order = sorted(range(len(lengths)), key=lambda i: -lengths[i])
    return [order[start : start + batch_size] for start in range(0, len(order), batch_size)]


def default_batch_size(device: str, cpu: int = 64, gpu: int = 512) -> int:
    return gpu if is_cuda(device) else cpu


def run_planned_groups(
    groups: Sequence[Sequence],
    lengths: Sequence[Sequence[int]],
    batch_size: int,
    prepare: Callable[[list], dict],
    model: Callable[[dict], Any],
    device: str,
    workers: int | None = None,
) -> Iterator:
    """``model(prepare(batch))`` over length-planned batches of each group in turn, each group's rows
    yielded in its items' order as it finishes (one tensor on ``device``, or None for no items), with one
    feed for all of them: worker processes (``workers``, by default ``default_workers``) start once and
    tokenize ahead across group boundaries."""
    import torch

    plans = [plan(group_lengths, batch_size) for group_lengths in lengths]
    work = [[group[i] for i in batch] for group, batches in zip(groups, plans) for batch in batches]
    outputs: list = []
    pending = iter(enumerate(plans))
    g, batches = next(pending, (None, None))

    with entered(device), feeding.out_of_memory_hint(f"a batch of {batch_size}"):  # pinning and caches follow device
        fed = feeding.feed(work, prepare, device, workers)
        while g is not None:
            while len(outputs) < len(batches):
                outputs.append(model(feeding.to_device(next(fed), device)))
            if outputs:
                flat = torch.cat(outputs)
                yield flat[torch.as_tensor(np.argsort(np.concatenate(batches), kind="stable"), device=flat.device)]
            else:
                yield None
            outputs = []
            g, batches = next(pending, (None, None))
