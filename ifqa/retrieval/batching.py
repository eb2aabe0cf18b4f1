"""Length-sorted batches fed by background workers: the CPU side of neural inference on a GPU.

A model on a GPU waits for its inputs when tokenizing, padding and Python run on the thread that
calls it (sentence-transformers' ``encode``): on an H100 that left all-MiniLM-L6-v2 at a sixth of
what the card does. Here batches are planned up front, longest first, prepared ahead (``feed``),
pinned and copied without blocking, with one synchronisation per call, not one per batch.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ifqa import feeding
from ifqa.devices import entered, is_cuda


def plan(lengths: Sequence[int], batch_size: int | None, max_tokens: int | None = None) -> list[list[int]]:
    """Positions in batches, longest first (ties keep their order): ``batch_size`` rows each, or with a
    token budget as many as fit ``max_tokens`` padded (rows × the batch's longest, which is its first; at
    least one row), at most ``batch_size`` when one is given. A budget, as text-embeddings-inference's
    ``--max-batch-tokens``, gives short texts large batches and long ones small: fewer model calls where
    a fixed batch is sized for the longest texts."""
    order = sorted(range(len(lengths)), key=lambda i: -lengths[i])
    if not max_tokens:
        return [order[start : start + batch_size] for start in range(0, len(order), batch_size)]
    batches, start = [], 0
    while start < len(order):
        rows = max(1, max_tokens // max(1, lengths[order[start]]))
        rows = min(rows, batch_size) if batch_size else rows
        batches.append(order[start : start + rows])
        start += rows
    return batches


#: a CPU's rows per batch of passages or (question, passage) pairs, 100-250 tokens each: a larger batch's
#: activations outgrow the caches (on Zen 4, 64 rows ran at 0.74-0.85x the rate of 16; benchmarks/cpu_batch.py)
CPU_ROWS = 16
#: a CPU's rows per batch of questions, a fifth as long: 64 rows hold about the tokens 16 passages do
CPU_QUESTION_ROWS = 64


def default_batch_size(device: str, cpu: int = CPU_ROWS, gpu: int = 512) -> int:
    return gpu if is_cuda(device) else cpu


def batch_rows(batch_size: int | None, max_tokens: int | None, device: str) -> int | None:
    """The rows a batch may hold (``plan``'s ``batch_size``): the one given, else the device's default; with a
    token budget, which sizes the batches itself, only the one given (None: no cap)."""
    return batch_size or (None if max_tokens else default_batch_size(device))


def batch_memory_hint(batch_size: int | None, max_tokens: int | None, unit: str = "", kept: str = ""):
    """``feeding.out_of_memory_hint`` naming what sizes a batch and the option that lowers it: the token
    budget (``--max-batch-tokens``), else its rows (``--batch-size``)."""
    if max_tokens:
        return feeding.out_of_memory_hint(f"a batch of up to {max_tokens:,} tokens", "--max-batch-tokens", kept)
    return feeding.out_of_memory_hint(f"a batch of {batch_size}{unit}", "--batch-size", kept)


def in_items_order(outputs: list, batches: Sequence[Sequence[int]]):
    """Planned batches' outputs (each a tensor of rows, for the items at ``batches``' positions) as one
    tensor, rows in the items' order; None for no batches."""
    import torch

    if not outputs:
        return None
    flat = torch.cat(outputs)
    return flat[torch.as_tensor(np.argsort(np.concatenate(batches), kind="stable"), device=flat.device)]


def run_planned(
    items: Sequence,
    lengths: Sequence[int],
    batch_size: int,
    prepare: Callable[[list], dict],
    model: Callable[[dict], Any],
    device: str,
):
    """``model(prepare(batch))`` over ``items`` in length-planned batches, prepared ahead (``feeding.feed``),
    the rows in the items' order: one tensor on ``device``, or None for no items."""
    batches = plan(lengths, batch_size)
    work = [[items[i] for i in batch] for batch in batches]
    with entered(device), batch_memory_hint(batch_size, None):  # pinning and caches follow device
        outputs = [model(feeding.to_device(inputs, device)) for inputs in feeding.feed(work, prepare, device)]
    return in_items_order(outputs, batches)
