"""Reranking: re-score a first stage's top passages with a cross-encoder (question and passage
read together), as a pipeline stage (``ifqa retrieve --rerank``) or on a run file (``ifqa rerank``).

Passages are read as text without titles, like the rerankers ``ifqa train reranker`` makes
(IfQA's gold passages have no title). The pairs of many questions are scored together, in batches
sorted by length, with the weights cast to reduced precision on a GPU (bf16 where native, else
fp16; casting is faster than autocast for inference) and fp32 on a CPU unless ``precision="bf16"``
is asked for (2-3 times faster on AMX, but its scores, and so ranks, then depend on the batch).
"""

from __future__ import annotations

import itertools
import json
import logging
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np

from ifqa import feeding
from ifqa.datasets.demo import load_demo
from ifqa.devices import entered, pick_device, pick_precision, torch_dtype
from ifqa.errors import IfqaError
from ifqa.models import check_max_length, check_model, loading, pair_inputs
from ifqa.paths import cache_dir
from ifqa.registry import RERANKERS
from ifqa.retrieval.batching import batch_memory_hint, batch_rows, in_items_order, plan
from ifqa.retrieval.encoders import demo_texts, resolve
from ifqa.retrieval.exported import Runtime, load_exported, score_module
from ifqa.retrieval.reordering import Item, RerankerKind
from ifqa.retrieval.sentence_models import PairModel, pair_model
from ifqa.retrieval.tokens import KEPT, PairTokens, TokenCache, fast_backend, tokenizer_identity

log = logging.getLogger(__name__)


def load_pair_model(name: str, device: str | None = None, max_length: int | None = None) -> PairModel:
    """A cross-encoder for scoring, read through transformers (``sentence_models.pair_model``: no
    sentence-transformers import); a folder that holds no model is one clear error."""
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    path = check_model(resolve(name), "; train one with `ifqa train reranker` or give a hub id", ("config.json",))
    source = str(path) if path.exists() else name
    with loading(name, "cross-encoder", source):
        return pair_model(source, pick_device(device), max_length)


def check_scoring_head(model: str) -> None:
    """A local encoder without a trained scoring head would score with a random one: refuse it."""
    config = Path(model) / "config.json"
    if not config.exists():
        return  # a hub id, or load_pair_model's own error
    try:
        architectures = json.loads(config.read_text()).get("architectures") or []
    except ValueError:
        raise IfqaError("unreadable config.json", model) from None
    if not any(name.endswith("ForSequenceClassification") for name in architectures):
        raise IfqaError(
            "an encoder without a trained scoring head, not a reranker; train one from it with "
            "`ifqa train reranker --model ...`",
            model,
        )


class CrossEncoderReranker(RerankerKind):
    """A cross-encoder scoring (question, passage) pairs. Pairs of many questions are scored together
    in length-planned batches, a group of questions at a time (``score_groups``: prepared ahead of the
    device), in ``precision`` (``devices.pick_precision``: reduced on a GPU, fp32 on a CPU by default)."""

    def __init__(
        self,
        model: str,
        depth: int = 100,
        batch_size: int | None = None,
        device: str | None = None,
        max_length: int | None = None,
        precision: str = "auto",
        backend: str = "torch",
        max_batch_tokens: int | None = None,
    ):
        self.backend = Runtime.parse(backend)
        self.backend.check(device)
        self.device = pick_device(device or ("cpu" if self.backend.exported else None))
        check_scoring_head(model)

        self.encoder = load_pair_model(model, self.device, max_length)
        check_max_length(max_length, self.encoder.model.config, model)
        self.encoder.model.eval()
        self.name, self.depth = model, depth
        self.batch_size = batch_rows(batch_size, max_batch_tokens, self.device)
        self.max_batch_tokens = max_batch_tokens
        # weights cast (faster than autocast for inference, as the encoders do): reduced precision on a GPU
        # by default, fp32 on every CPU unless asked, so a CPU's scores are the same whatever its instructions
        if self.backend.exported and precision not in ("auto", "fp32"):
            raise IfqaError(f"--precision {precision}: an exported backend runs fp32 or int8 (--quantize int8)")
        self.precision = "fp32" if self.backend.exported else pick_precision(precision, self.device, "rerank")
        if self.precision != "fp32":
            self.encoder.model.to(torch_dtype(self.precision))
        self._exported, self._pairs, self._tokens = None, None, None
        self._tokenizing = threading.Lock()  # the feed's threads share one tokenizer (see _rows)
        if self.backend.exported:
            pairs, module = _probe_pairs(), score_module(self.encoder.model)
            self._exported = load_exported(module, self._inputs, "score", self.backend, pairs[:64], pairs[64:256])

    @property
    def batch_rows(self) -> int:
        """The rows a batch holds at the least: ``batch_size``, or what the token budget fits at the length limit."""
        return self.batch_size or max(1, self.max_batch_tokens // (self.encoder.max_seq_length or KEPT))

    @classmethod
    def claims(cls, model: str) -> bool:
        return True  # tried last: any folder or hub id not claimed by another kind

    @classmethod
    def load(cls, model: str, depth: int = 100, **options) -> CrossEncoderReranker:
        return cls(model, depth, **options)

    def describe(self) -> dict:
        """What made the scores: a precision other than fp32 is named (its scores differ from fp32's in
        the last digits), so a run records it and a resume never mixes the two."""
        described = {"model": self.name, "depth": self.depth, "max_length": self.encoder.max_seq_length}
        if self.precision != "fp32":
            described["precision"] = self.precision
        return {**described, "backend": self.backend.label} if self.backend.exported else described

    def _inputs(self, pairs: list[tuple[str, str]]) -> dict:
        questions, texts = zip(*pairs)
        tokenizer, max_length = self.encoder.tokenizer, self.encoder.max_seq_length
        return dict(pair_inputs(tokenizer, list(questions), list(texts), max_length, padding=True, return_tensors="pt"))

    def _logits(self, features: dict):
        import torch

        if self._exported:
            return self._exported(features)
        with torch.inference_mode():
            return self.encoder.model(**features).logits.float()[:, -1]

    def score_many(self, items: Sequence[Item]) -> list[list[float]]:
        """Cross-encoder logits for each (question, texts, first-stage scores); the first stage's scores are not used."""
        return next(self.score_groups([items]))

    def _pair_tokens(self, groups: Sequence[Sequence[Item]]) -> PairTokens | None:
        """How pairs are built from their ids (``tokens``), checked once against the tokenizer's
        own pairs on the first pairs here and a long one (None: this tokenizer's pairs are tokenized
        pair by pair)."""
        if self._pairs is not None:
            return self._pairs or None
        probe = list(itertools.islice(((q, t) for items in groups for q, texts, _ in items for t in texts), 16))
        if probe:  # decided on the first call with pairs (a served question may have none)
            self._pairs = False
            tokenizer, max_length = self.encoder.tokenizer, self.encoder.max_seq_length
            if max_length and fast_backend(tokenizer) is not None:
                probe.append((probe[0][0], " ".join([probe[0][1]] * 40)))  # one the passage is cut in
                try:
                    built = PairTokens(tokenizer, max_length)
                    self._pairs = built if built.matches(*map(list, zip(*probe))) else False
                except ValueError:
                    pass
                if not self._pairs:
                    log.info(
                        "%s: pairs are tokenized pair by pair (its tokenizer's pairs are not built from ids)", self.name
                    )
        return self._pairs or None

    def _token_rows(self, items: Sequence[Item], pairs: PairTokens) -> list[tuple]:
        """A group's pairs as (question, passage, question ids, passage ids, passage ids kept): each distinct
        passage's ids from the token cache (tokenized once per tokenizer), each question's once."""
        texts = list(dict.fromkeys(t for _, texts, _ in items for t in texts))
        passage_ids = dict(zip(texts, self._tokens.ids(texts, pairs.max_length)))
        questions = list(dict.fromkeys(q for q, _, _ in items))
        question_ids = dict(zip(questions, self._tokens.tokenize(questions)))  # once each, kept nowhere
        return [
            (q, t, question_ids[q], passage_ids[t], pairs.room(question_ids[q], passage_ids[t]))
            for q, texts, _ in items
            for t in texts
        ]

    def _rows(self, batch: list[tuple]) -> dict:
        """A batch's tensors: laid out from ids, or (a pair whose question must be cut too) tokenized."""
        if all(kept is not None for *_, kept in batch):
            return self._pairs.rows([(q, p, kept) for _, _, q, p, kept in batch])
        with self._tokenizing:  # the tokenizer's call sets its truncation: one thread at a time
            return self._inputs([(q, t) for q, t, *_ in batch])

    def _group_batches(self, items: Sequence[Item]) -> list[tuple[np.ndarray, dict]]:
        """A group's pairs in batches planned by length, longest first: (positions in the group's pair
        order, inputs). Laid out from ids (their token counts) where the tokenizer's pairs allow it, the
        group's passages looked up here: where the feed prepares it, ahead of the device, not all groups'
        before the first batch. Else tokenized pair by pair, planned by characters."""
        if self._pairs:
            rows: list = self._token_rows(items, self._pairs)
            lengths = [len(q) + (kept or len(p)) for _, _, q, p, kept in rows]
            prepare = self._rows
        else:
            rows = [(question, text) for question, texts, _ in items for text in texts]
            lengths = [len(q) + len(t) for q, t in rows]
            prepare = self._inputs
        batches = plan(lengths, self.batch_size, self.max_batch_tokens)
        return [(np.asarray(batch), prepare([rows[i] for i in batch])) for batch in batches]

    def score_groups(self, groups: Sequence[Sequence[Item]]) -> Iterator[list[list[float]]]:
        """``score_many`` for each group of items in turn, yielded as each finishes. Each group is one
        item of one feed (``feeding.feed``): its passages looked up and its batches laid out while the
        device scores the group before it, by the feed's threads on CUDA where pairs are laid out from
        ids (microseconds a pair), else by worker processes there; in this process on a CPU.

        A group's scores are yielded once the next group is queued on the device: the caller's work on
        them (ordering, writing) runs while the device scores the next, where waiting for each group's
        copy before queuing the next left a GPU idle for all of it."""
        import torch

        pairs = self._pair_tokens(groups)
        if self.max_batch_tokens and self._pairs is False:  # pairs tokenized one by one: no counts to budget
            raise IfqaError(
                f"--max-batch-tokens plans batches by token counts, which {self.name}'s tokenizer does not give "
                "(its pairs are tokenized pair by pair); leave it out"
            )
        if pairs is not None and self._tokens is None:  # made here, so feed workers inherit it
            tokenizer = self.encoder.tokenizer
            self._tokens = TokenCache(tokenizer, tokenizer_identity(tokenizer), cache_dir())
        workers = 0 if pairs is not None else None
        with entered(self.device), batch_memory_hint(self.batch_size, self.max_batch_tokens):
            launched = None  # the group before: its scores on their way back
            for items, batches in zip(groups, feeding.feed(groups, self._group_batches, self.device, workers)):
                logits = [self._logits(feeding.to_device(inputs, self.device)) for _, inputs in batches]
                # copied back as the batches give them, queued behind them, and put in order on the host: an
                # order sent to the device (the planned positions) would wait there for the group to finish
                copied = feeding.copy_back(torch.cat(logits)) if logits else None
                if launched is not None:
                    yield _scores(*launched)
                launched = items, copied, [positions for positions, _ in batches]
            if launched is not None:
                yield _scores(*launched)


def _scores(items: Sequence[Item], copied: tuple | None, positions: list[np.ndarray]) -> list[list[float]]:
    """Each item's scores from a group's logits copied back in batch order (``feeding.copy_back``), once the
    copy is done, put back in the items' order (``positions``: each batch's rows' places in the group)."""
    flat = iter([])
    if copied is not None:
        host, done = copied
        if done is not None:
            done.synchronize()
        flat = iter(in_items_order([host], positions).tolist())  # on the host: the order never goes to the device
    return [list(itertools.islice(flat, len(texts))) for _, texts, _ in items]


def _probe_pairs() -> list[tuple[str, str]]:
    """(question, passage) pairs from the packaged demo set: each question with its gold passages and
    others, so the probe and int8 calibration see relevant and irrelevant pairs."""
    texts = demo_texts()
    examples = load_demo("dev") + load_demo("train")
    return [
        (
            e.question,
            e.context[i % len(e.context)] if i % 2 == 0 and e.context else texts[(7 * n + 13 * i) % len(texts)],
        )
        for i in range(8)
        for n, e in enumerate(examples)
    ]


def load_reranker(model: str, depth: int = 100, **options) -> RerankerKind:
    """The reranker ``model`` is, by the first kind in ``RERANKERS`` that claims it (the
    question-agnostic control for a folder holding one, else a cross-encoder), given ``options``
    (``CrossEncoderReranker``'s: batch_size, device, max_length, precision, backend, max_batch_tokens)."""
    kind = next(kind for kind in map(RERANKERS.get, RERANKERS) if kind.claims(model))
    return kind.load(model, depth, **options)
