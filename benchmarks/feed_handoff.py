"""What a feed worker's batch costs the calling process to receive: ifqa's feed (``feeding.feed``, an
item's tensors laid end to end in one buffer per dtype) beside torch's DataLoader handing the same
tokenizer-shaped dict over tensor by tensor (what ifqa did first), one worker, prepare instant. Then items
of ``ITEM_BATCHES`` batches, as a dense index's chunk or a reranker's group of questions is fed: beside
them, each batch's tensors stacked into a buffer of its own (what the feed did before a whole item
crossed as one). Then what a reranker's batch costs the thread that prepares it when its passages' tokens
are cached: pairs laid out from ids (``tokens.PairTokens.rows``) beside the tokenizer's own pair call.

torch passes each tensor through shared memory with a file descriptor of its own, a cost paid per
tensor whatever its size: the calling process's CPU per batch is what one feed worker's batches take
from the thread that runs the model (issue #83: the host keeping up with the chip).

    python benchmarks/feed_handoff.py [--batches 400] [--repeats 3]
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import Parser, machine, markdown_table  # noqa: E402

from ifqa import feeding  # noqa: E402

SHAPES = ((64, 128), (512, 128), (512, 256))  # the CPU batch of 128 tokens; a GPU's at 128 and 256 tokens
KEYS = ("input_ids", "token_type_ids", "attention_mask")


def tokenized(shape: tuple[int, int]):
    """A prepare that returns what a BERT tokenizer returns for a batch of ``shape``, at once."""
    import torch

    def prepare(_item) -> dict:
        return {key: torch.zeros(shape, dtype=torch.int64) for key in KEYS}

    return prepare


def tensor_by_tensor(work, prepare):
    """The DataLoader as ifqa's feed ran it before: each batch's dict handed over tensor by tensor."""
    import torch
    from torch.utils.data import DataLoader

    class Prepared:
        def __len__(self):
            return len(work)

        def __getitem__(self, i):
            return prepare(work[i])

    loader = DataLoader(
        Prepared(), batch_size=None, num_workers=1, prefetch_factor=feeding.PREFETCH,
        multiprocessing_context="fork", generator=torch.Generator().manual_seed(0),
    )  # fmt: skip
    yield from loader


ITEM_BATCHES = 16  # batches in an item of several: a reranker's group holds 8, a dense chunk 64 at the CPU's batch


def several(shape: tuple[int, int]):
    """A prepare that returns an item of ``ITEM_BATCHES`` batches of ``shape`` (positions, inputs), at once."""
    one = tokenized(shape)
    return lambda item: [(list(range(shape[0])), one(item)) for _ in range(ITEM_BATCHES)]


def batch_by_batch(work, prepare):
    """The DataLoader handing an item of several batches over with each batch's tensors stacked into a
    buffer of its own (the feed before a whole item crossed as one buffer per dtype)."""
    import torch

    def stacked(item):
        return [(positions, torch.stack([batch[key] for key in KEYS])) for positions, batch in prepare(item)]

    for item in tensor_by_tensor(work, stacked):
        yield [(positions, dict(zip(KEYS, buffer.unbind(0)))) for positions, buffer in item]


def parent_cpu(path, work, prepare, per_item: int = 1) -> float:
    """The calling process's CPU µs per batch past the first item (which includes the worker's start)."""
    items = iter(path(work, prepare))
    next(items)
    started = time.process_time()
    n = sum(1 for _ in items)
    return 1e6 * (time.process_time() - started) / n / per_item


def item_rows(items: int, repeats: int) -> list[dict]:
    """The calling process's CPU µs per batch for items of ``ITEM_BATCHES`` batches, three ways."""
    rows, work = [], [[i] for i in range(items)]
    fed = lambda w, p: feeding.feed(w, p, "cpu", workers=1)  # noqa: E731
    for shape in SHAPES[:2]:
        prepare = several(shape)
        first, before, ours = (
            statistics.median(parent_cpu(path, work, prepare, ITEM_BATCHES) for _ in range(repeats))
            for path in (tensor_by_tensor, batch_by_batch, fed)
        )
        rows.append(
            {
                f"items of {ITEM_BATCHES} batches (rows x tokens x tensors)": f"{shape[0]} x {shape[1]} x {len(KEYS)}",
                "tensor by tensor (µs/batch)": round(first),
                "a buffer per batch (µs/batch)": round(before),
                "ifqa's feed: a buffer per dtype (µs/batch)": round(ours),
                "ratio to a buffer per batch": f"{before / ours:.2f}x",
            }
        )
    return rows


def pair_rows(repeats: int) -> list[dict]:
    """CPU µs a pair of laying out a batch of 64 (question, passage) pairs from their ids, beside the
    tokenizer's own call on the texts (all-MiniLM-L6-v2's tokenizer, the demo passages, 512 tokens)."""
    import numpy as np
    from transformers import AutoTokenizer

    from ifqa.models import pair_inputs
    from ifqa.retrieval.encoders import demo_texts, resolve
    from ifqa.retrieval.tokens import PairTokens

    tokenizer = AutoTokenizer.from_pretrained(resolve("sentence-transformers/all-MiniLM-L6-v2"))
    question, texts = "If the river dried up, what would the bridge cross?", demo_texts()[:64]
    layout = PairTokens(tokenizer, 512)
    q = np.asarray(tokenizer(question, add_special_tokens=False)["input_ids"], "<i4")
    ids = [np.asarray(i, "<i4") for i in tokenizer(texts, add_special_tokens=False)["input_ids"]]
    pairs = [(q, p, layout.room(q, p)) for p in ids]

    def per_pair(call) -> float:
        call()
        started, rounds = time.process_time(), 200
        for _ in range(rounds):
            call()
        return 1e6 * (time.process_time() - started) / rounds / len(pairs)

    ours, theirs = (
        statistics.median(per_pair(call) for _ in range(repeats))
        for call in (
            lambda: layout.rows(pairs),
            lambda: pair_inputs(tokenizer, [question] * len(texts), texts, 512, padding=True, return_tensors="pt"),
        )
    )
    return [
        {
            "64 pairs, 512 tokens at most": "CPU µs a pair",
            "from cached ids (PairTokens.rows)": round(ours, 2),
            "the tokenizer's own call": round(theirs, 2),
            "ratio": f"{theirs / ours:.1f}x",
        }
    ]


def main() -> None:
    parser = Parser(description=__doc__)
    parser.add_argument("--batches", type=int, default=400)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    work = [[i] for i in range(args.batches)]
    rows = []
    for shape in SHAPES:
        prepare = tokenized(shape)
        before, ours = (
            statistics.median(parent_cpu(path, work, prepare) for _ in range(args.repeats))
            for path in (tensor_by_tensor, lambda w, p: feeding.feed(w, p, "cpu", workers=1))
        )
        rows.append(
            {
                "batch (rows x tokens x tensors)": f"{shape[0]} x {shape[1]} x {len(KEYS)}",
                "tensor by tensor (µs/batch)": round(before),
                "ifqa's feed (µs/batch)": round(ours),
                "ratio": f"{before / ours:.2f}x",
            }
        )
    print(f"machine: {machine()}; {args.batches} batches, median of {args.repeats}\n")
    print(markdown_table(rows))
    print()
    print(markdown_table(item_rows(max(2, args.batches // ITEM_BATCHES), args.repeats)))
    print()
    print(markdown_table(pair_rows(args.repeats)))


if __name__ == "__main__":
    main()
