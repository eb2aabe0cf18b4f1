"""Passage batches of the dense encoders (retrieval/encoders.py): planned by token counts where the Rust
tokenizer's batch call gives the tokenizer's own batches (sentence-transformers models and DPR's (title,
text) pairs), each batch equal to the tokenizer's own inputs, so the vectors are those of the
library's tokenization."""

from __future__ import annotations

import gzip
import json

import numpy as np
import pytest
import torch

from ifqa.datasets.demo import packaged_passages
from ifqa.errors import IfqaError
from ifqa.retrieval import DEFAULT_ENCODER
from ifqa.retrieval.encoders import DPREncoder, SentenceEncoder, resolve


@pytest.fixture(scope="module")
def passages() -> list[dict]:
    """Demo passages, half given a title (DPR reads (title, text) pairs), and one of numbers alone."""
    with gzip.open(packaged_passages(), "rt", encoding="utf-8") as handle:
        found = [json.loads(line) for _, line in zip(range(37), handle)]
    found = [{**p, "title": p["title"] or (f"Title {i}" if i % 2 else "")} for i, p in enumerate(found)]
    return [*found, {"id": "n", "title": "", "text": "1,234 5,678 " * 40}]


@pytest.fixture(scope="module")
def dpr_folder(tmp_path_factory):
    """A tiny DPR pair (random weights) with all-MiniLM-L6-v2's tokenizer, a BERT fast tokenizer."""
    from transformers import AutoTokenizer, DPRConfig, DPRContextEncoder, DPRQuestionEncoder

    folder = tmp_path_factory.mktemp("tiny") / "dpr-ctx_encoder"
    tokenizer = AutoTokenizer.from_pretrained(resolve(DEFAULT_ENCODER))
    torch.manual_seed(0)
    config = DPRConfig(
        vocab_size=tokenizer.vocab_size,
        hidden_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=37,
    )
    for model, target in ((DPRContextEncoder, folder), (DPRQuestionEncoder, folder.with_name("dpr-question_encoder"))):
        model(config).save_pretrained(target)
        tokenizer.save_pretrained(target)
    return folder


def _each_batch_is_the_tokenizers_own(batches, own_inputs, passages: list[dict], batch_size: int, by_tokens=True):
    assert sorted(i for positions, _ in batches for i in positions) == list(range(len(passages)))
    assert all(len(positions) == batch_size for positions, _ in batches[:-1])
    for positions, inputs in batches:
        own = own_inputs([passages[i] for i in positions])
        assert set(inputs) == set(own)
        for key, value in inputs.items():
            assert torch.equal(value, own[key]) if hasattr(value, "shape") else value == own[key], key
    longest = [int(inputs["attention_mask"].sum(1).max()) for _, inputs in batches]
    assert not by_tokens or longest == sorted(longest, reverse=True)


def test_a_dpr_encoders_passage_batches_are_its_tokenizers_own_pairs_planned_by_tokens(dpr_folder, passages):
    encoder = DPREncoder(str(dpr_folder), device="cpu", max_length=64, precision="fp32")
    assert encoder.tokenizes_in_parallel  # the Rust batch call was held to the tokenizer's own pairs
    batches = encoder.passage_batches(passages, 8)

    def own(chosen: list[dict]) -> dict:
        return encoder._tokenize([p["title"] for p in chosen], [p["text"] for p in chosen])

    _each_batch_is_the_tokenizers_own(batches, own, passages, 8)
    planned = np.empty((len(passages), encoder.dim), np.float32)
    for positions, inputs in batches:
        planned[positions] = encoder.passage_vectors(inputs).numpy()
    alone = np.concatenate([encoder.passage_vectors(own([p])).numpy() for p in passages])
    # fp32, a 32-wide model: a row computed in another batch and padding differs by a few float32 ulps
    np.testing.assert_allclose(planned, alone, rtol=0, atol=64 * np.finfo(np.float32).eps * np.abs(alone).max())


def test_a_sentence_encoders_passage_batches_are_its_tokenizers_own_planned_by_tokens(passages):
    encoder = SentenceEncoder(DEFAULT_ENCODER, device="cpu", max_length=64, precision="fp32")
    assert encoder.tokenizes_in_parallel
    batches = encoder.passage_batches(passages, 8)
    _each_batch_is_the_tokenizers_own(batches, encoder.passage_inputs, passages, 8)


def test_without_a_fast_path_batches_are_planned_by_characters(passages):
    """An encoder whose tokenizer gives no batches of its own (a slow one, a prompt) plans by characters."""
    encoder = SentenceEncoder(DEFAULT_ENCODER, device="cpu", max_length=64, precision="fp32")
    encoder._fast = None
    batches = encoder.passage_batches(passages, 8)
    _each_batch_is_the_tokenizers_own(batches, encoder.passage_inputs, passages, 8, by_tokens=False)
    first = [len(passages[i]["title"]) + len(passages[i]["text"]) for i in batches[0][0]]
    assert min(first) >= max(len(p["title"]) + len(p["text"]) for i, p in enumerate(passages) if i not in batches[0][0])


def test_questions_are_batched_by_their_token_counts(monkeypatch):
    """Four questions of each token count, two of words and two of numbers (three pieces in six characters
    each): batched by token counts, each batch is one count; by characters the numbers fell among shorter
    word questions."""
    encoder = SentenceEncoder(DEFAULT_ENCODER, device="cpu", max_length=64, precision="fp32")
    queries = [text for n in (6, 12, 18) for text in ["word " * n] * 2 + ["1,234 " * (n // 3)] * 2]
    counts = dict(zip(queries, encoder._fast.counts(queries)))
    batches, own = [], encoder.query_inputs
    monkeypatch.setattr(encoder, "query_inputs", lambda batch: batches.append(list(batch)) or own(batch))
    assert encoder.encode_queries(queries, batch_size=4).shape == (12, encoder.dim)
    assert sorted(len(batch) for batch in batches) == [4, 4, 4]
    assert all(len({counts[q] for q in batch}) == 1 for batch in batches), batches


def test_on_a_cpu_passages_go_16_to_a_batch_and_questions_64(passages, monkeypatch):
    """A CPU's default rows (benchmarks/cpu_batch.py): 16 passages, whose activations at 64 outgrew the caches,
    and 64 questions, a fifth as long; a batch size given is kept."""
    encoder = SentenceEncoder(DEFAULT_ENCODER, device="cpu", max_length=64, precision="fp32")
    batches = []
    for name in ("passage_inputs", "query_inputs"):
        own = getattr(encoder, name)
        monkeypatch.setattr(encoder, name, lambda batch, own=own: batches.append(len(batch)) or own(batch))
    encoder.encode_passages(passages)
    assert batches == [16, 16, len(passages) - 32]
    batches.clear()
    encoder.encode_queries([p["text"][:80] for p in passages] * 2)
    assert batches == [64, 2 * len(passages) - 64]
    batches.clear()
    encoder.encode_passages(passages, batch_size=64)
    assert batches == [len(passages)]


@pytest.mark.parametrize("kind", ["sentence", "dpr"])
def test_a_token_budget_batches_passages_within_it_and_encodes_them_alike(kind, dpr_folder, passages):
    """With ``max_tokens`` each batch holds as many passages, longest first, as fit the budget padded (rows ×
    width), each batch still the tokenizer's own; the vectors are those of fixed batches, up to the float32
    rounding a row's batch and padding make."""
    if kind == "dpr":
        encoder = DPREncoder(str(dpr_folder), device="cpu", max_length=64, precision="fp32")
    else:
        encoder = SentenceEncoder(DEFAULT_ENCODER, device="cpu", max_length=64, precision="fp32")
    budgeted = encoder.passage_batches(passages, None, max_tokens=256)
    fixed = encoder.passage_batches(passages, 8)
    assert sorted(i for positions, _ in budgeted for i in positions) == list(range(len(passages)))
    shapes = [tuple(inputs["input_ids"].shape) for _, inputs in budgeted]
    assert all(rows == 1 or rows * width <= 256 for rows, width in shapes), shapes
    assert len({rows for rows, _ in shapes}) > 1 and len(budgeted) != len(fixed)  # rows follow the lengths
    for positions, inputs in budgeted:  # each batch is what the fixed plan would give for those passages
        alone = encoder.passage_batches([passages[i] for i in positions], len(positions))[0][1]
        assert all(torch.equal(inputs[k], alone[k]) for k in inputs if hasattr(inputs[k], "shape"))

    def vectors(batches) -> np.ndarray:
        out = np.empty((len(passages), encoder.dim), np.float32)
        for positions, inputs in batches:
            out[positions] = encoder.passage_vectors(inputs).numpy()
        return out

    reference = vectors(fixed)
    np.testing.assert_allclose(
        vectors(budgeted), reference, rtol=0, atol=64 * np.finfo(np.float32).eps * np.abs(reference).max()
    )


def test_a_token_budget_is_refused_where_batches_are_planned_by_characters(passages):
    encoder = SentenceEncoder(DEFAULT_ENCODER, device="cpu", max_length=64, precision="fp32")
    encoder._fast = None
    assert not encoder.tokenizes_in_parallel
    with pytest.raises(IfqaError, match="token budget plans batches by token counts"):
        encoder.passage_batches(passages, None, max_tokens=256)
