"""Length-planned batches of a retrieval model (``retrieval/batching.py``), fed by ``ifqa.feeding``, on a toy model."""

import pytest
import torch

from ifqa import feeding
from ifqa.retrieval import batching


def _prepare(batch: list[int]) -> dict:
    return {"x": torch.tensor(batch)}


def _model(features: dict):
    return features["x"].float() * 2


@pytest.mark.parametrize("workers", [0, 2])
def test_rows_come_back_in_their_items_order(monkeypatch, workers):
    monkeypatch.setattr(feeding, "default_workers", lambda device, asked=None: workers)
    groups = [[5, 1, 4], [], [9, 2, 6, 3, 8, 7], [0]]
    lengths = [[len(str(i)) * (i % 3 + 1) for i in group] for group in groups]
    outputs = [batching.run_planned(g, n, 2, _prepare, _model, "cpu") for g, n in zip(groups, lengths)]
    assert outputs[1] is None
    assert [o.tolist() for i, o in enumerate(outputs) if i != 1] == [[2 * x for x in g] for g in groups if g]
    alone = batching.run_planned(groups[2], lengths[2], 4, _prepare, _model, "cpu")
    assert alone.tolist() == [18, 4, 12, 6, 16, 14]


@pytest.mark.parametrize("batch_size", [None, 3])
def test_a_token_budget_fills_each_batch_with_as_many_rows_as_fit_it_padded(batch_size):
    """Longest first, each batch as many rows as fit the budget at its longest row (its first), at least one,
    at most ``batch_size`` when given; every position once."""
    lengths = [10, 40, 5, 5, 20, 90, 5, 12, 5, 30]
    batches = batching.plan(lengths, batch_size, max_tokens=40)
    assert sorted(i for batch in batches for i in batch) == list(range(len(lengths)))
    order = [i for batch in batches for i in batch]
    assert order == batching.plan(lengths, len(lengths))[0]  # the same longest-first order, cut by the budget
    for batch in batches:
        rows = len(batch)
        assert rows == 1 or rows * lengths[batch[0]] <= 40, batch  # within the budget, padded
        assert batch_size is None or rows <= batch_size
    # full: the next row would not have fitted (or the batch is capped, or the rows ran out)
    for batch in batches[:-1]:
        capped = batch_size is not None and len(batch) == batch_size
        assert capped or (len(batch) + 1) * lengths[batch[0]] > 40
    sizes = [len(batch) for batch in batches]
    assert sizes == ([1, 1, 1, 2, 4, 1] if batch_size is None else [1, 1, 1, 2, 3, 2])
    assert batching.plan(lengths, 4) == batching.plan(lengths, 4, max_tokens=None)  # no budget: fixed batches


@pytest.mark.parametrize(
    ("batch_size", "max_tokens", "named"),
    [
        (64, None, "a batch of 64 passages; lower --batch-size"),
        (None, 16384, "up to 16,384 tokens; lower --max-batch-tokens"),
    ],
)
def test_out_of_memory_names_what_sizes_the_batch(batch_size, max_tokens, named):
    """Every batched command's one line: the token budget when one sizes the batches, else the rows."""
    from ifqa.errors import IfqaError

    with pytest.raises(IfqaError, match=named):
        with batching.batch_memory_hint(batch_size, max_tokens, " passages"):
            raise torch.OutOfMemoryError("CUDA out of memory")
    assert batching.batch_rows(None, max_tokens, "cpu") == (None if max_tokens else 16)
    assert batching.batch_rows(8, max_tokens, "cpu") == 8
