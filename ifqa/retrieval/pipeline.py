"""The retrieval pipeline: query formulation -> first-stage search over one or more indexes ->
fusion -> reranking -> run records (DPR/FiD retrieval JSON, one question per line).

``ifqa retrieve`` and the experiment runner both build it from a ``RetrievalConfig``, so the two
cannot drift apart. Each stage is a slot: query modes and engines come from the registries, and a
reranker is any object with ``rerank(question, hits, passages) -> hits``.
"""

from __future__ import annotations

import functools
import json
import logging
import math
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from ifqa.artifacts import Context, Example, QuestionSet, RunRecord, write_manifest
from ifqa.errors import IfqaError
from ifqa.eval.passages import run_record
from ifqa.io import atomic_write
from ifqa.registry import QUERY_MODES
from ifqa.retrieval.fusion import FUSIONS
from ifqa.retrieval.index import Hits, Retriever

log = logging.getLogger(__name__)

DEMO_INDEX = "demo:bm25"


@dataclass
class RetrievalConfig:
    """Everything that decides a run (and so its identity in experiments)."""

    indexes: list[str] = field(default_factory=lambda: [DEMO_INDEX])
    k: int = 20
    query_mode: str = "question"
    fusion: str = "rrf"
    weights: list[float] | None = None
    depth: int = 100  # passages each list contributes when several are fused
    corpus: str | None = None
    device: str | None = None
    threads: int = 1
    batch_size: int = 64
    rewrite_model: str | None = None  # the LLM behind the rewrite and hyde query modes
    rewrite_backend: str = "openai"
    rewrite_base_url: str | None = None
    rewrite_cache: str | None = None  # response cache file (default: the shared LLM cache)
    query_encoder: str | None = None  # a question-side encoder from `ifqa train retriever --question-side-only`
    verify_corpus: bool = False  # check the collection's full sha256 (size and sampled offsets always are)
    rerank: str | None = None  # a cross-encoder folder or hub id
    rerank_depth: int = 100  # first-stage passages the reranker re-scores
    rerank_backend: str = "torch"  # torch, or an exported CPU backend: onnx, openvino, onnx-int8, openvino-int8

    def __post_init__(self) -> None:
        """Every value checked here, once, whether it came from the command line, Python or an
        experiment's YAML: a wrong type or value is one line before any index is opened."""
        if not isinstance(self.indexes, list) or not all(isinstance(i, str) and i for i in self.indexes):
            raise IfqaError(f"{_named('indexes')} must be a list of index folders or specs, got {self.indexes!r}"[:200])
        for name in ("k", "depth", "threads", "batch_size", "rerank_depth"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise IfqaError(f"{_named(name)} must be a whole number of at least 1, got {value!r}")
        if self.fusion not in FUSIONS:
            raise IfqaError(f"unknown fusion {self.fusion!r}; choose from {', '.join(FUSIONS)}")
        if self.weights is not None:
            weights = list(self.weights) if isinstance(self.weights, (list, tuple)) else None
            if (
                weights is None
                or not all(isinstance(w, (int, float)) and not isinstance(w, bool) for w in weights)
                or not all(math.isfinite(w) and w >= 0 for w in weights)
                or not any(weights)
            ):
                raise IfqaError(
                    f"{_named('weights')} must be finite numbers, not negative and not all 0, got {self.weights!r}"[
                        :200
                    ]
                )
            if len(self.indexes) < 2:
                raise IfqaError(f"{_named('weights')} fuse several indexes; give two or more indexes, or no weights")
            if len(weights) != len(self.indexes):
                raise IfqaError(
                    f"{_named('weights')} need one weight per index ({len(self.indexes)}), got {len(weights)}"
                )
        for name in ("rerank", "query_encoder", "rewrite_model", "rewrite_base_url", "corpus", "device"):
            if getattr(self, name) is not None and not isinstance(getattr(self, name), str):
                raise IfqaError(f"{_named(name)} must be a string, got {getattr(self, name)!r}"[:200])
        if not isinstance(self.query_mode, str):
            raise IfqaError(f"query mode must be a string, got {self.query_mode!r}")
        QUERY_MODES.get(self.query_mode)  # an unknown mode fails here, before any index is opened
        for name, needed in DEPENDS_ON.items():  # a setting that would do nothing without another is refused
            if getattr(self, name) != getattr(RetrievalConfig, name, None) and getattr(self, needed) is None:
                raise IfqaError(f"{_named(name)} applies to {_named(needed)}, which is not given")


#: Settings that only act through another one: given without it, they would silently do nothing.
DEPENDS_ON = {"rerank_backend": "rerank", "rerank_depth": "rerank"}


def _named(field: str) -> str:
    """A setting as both its YAML key and its option: ``rerank_depth (--rerank-depth)``."""
    return f"{field} (--{field.replace('_', '-')})"


class Reranker(Protocol):
    """``rerank`` one question's hits; a reranker may also offer ``rerank_many(questions, hits_lists,
    passages)`` to score several questions' pairs together."""

    def rerank(self, question: str, hits: Hits, passages) -> Hits: ...


def check_same_collection(retrievers: Sequence[Retriever]) -> None:
    """Fusion merges passage positions, so every index must cover the same collection."""
    checksums = {r.manifest.get("corpus", {}).get("sha256") for r in retrievers}
    if len(checksums) > 1:
        raise IfqaError("hybrid retrieval needs indexes of the same collection (their corpus checksums differ)")


class RetrievalPipeline:
    def __init__(
        self, config: RetrievalConfig, retrievers: Sequence[Retriever] | None = None, rerankers: Sequence[Reranker] = ()
    ):
        from ifqa.devices import check_device
        from ifqa.retrieval.specs import open_index

        if config.rerank:  # an exported backend on a GPU: its own line, before the device's
            from ifqa.retrieval.exported import Backend

            Backend.parse(config.rerank_backend).check(config.device)
        check_device(config.device)  # before an index is opened (or the demo's is built on first use)
        self.config = config
        self.retrievers = (
            list(retrievers)
            if retrievers is not None
            else [open_index(spec, config.corpus, config.device) for spec in config.indexes]
        )
        if not self.retrievers:
            raise IfqaError("no index to search: name one or more indexes")
        if config.verify_corpus:
            from ifqa.retrieval.index import verify_collection

            for retriever in self.retrievers:
                verify_collection(retriever)
        if len(self.retrievers) > 1:
            check_same_collection(self.retrievers)
        if config.query_encoder:
            from ifqa.retrieval.encoders import use_query_encoder

            for retriever in self.retrievers:
                use_query_encoder(retriever, config.query_encoder, config.device)
        formulation = QUERY_MODES.get(config.query_mode)
        self.formulate = (
            formulation.for_config(config)
            if hasattr(formulation, "for_config")
            else lambda questions: [formulation(question) for question in questions]
        )
        self.rerankers = list(rerankers)
        # a run reads the same passage for many questions (half of them recur): parse each once
        self._passage = functools.lru_cache(maxsize=65536)(self.passages.__getitem__)
        if config.rerank and not rerankers:
            from ifqa.retrieval.rerank import load_reranker

            self.rerankers = [
                load_reranker(config.rerank, config.rerank_depth, device=config.device, backend=config.rerank_backend)
            ]

    @property
    def passages(self):
        return self.retrievers[0].passages

    def search(
        self, questions: Sequence[str], k: int | None = None, subqueries: Sequence[Sequence[str]] | None = None
    ) -> list[Hits]:
        """Top-k for each question: every (index, sub-query) list, fused when there are several.

        ``k`` overrides the configured depth for this call; ``subqueries`` are the questions' query
        formulations when the caller already made them (``ifqa serve`` shows them).
        """
        config = self.config
        k = k or config.k
        subqueries = self.formulate(list(questions)) if subqueries is None else subqueries
        flat = [query for queries in subqueries for query in queries]
        several = len(self.retrievers) > 1 or any(len(queries) > 1 for queries in subqueries)
        wanted = max(k, config.rerank_depth) if self.rerankers else k  # what fusion must return
        depth = max(wanted, config.depth) if several else wanted
        per_index = [r.search(flat, depth, config.threads) for r in self.retrievers]
        weights = config.weights or [1.0] * len(self.retrievers)
        combine = FUSIONS[config.fusion]
        results, start = [], 0
        for queries in subqueries:
            lists = [(weight, hits[start + j]) for weight, hits in zip(weights, per_index) for j in range(len(queries))]
            start += len(queries)
            results.append(
                lists[0][1] if not several else combine([h for _, h in lists], wanted, [w for w, _ in lists])
            )
        for reranker in self.rerankers:  # the questions' pairs together: a GPU scores them in full batches
            results = (
                reranker.rerank_many(questions, results, self.passages)
                if hasattr(reranker, "rerank_many")
                else [reranker.rerank(question, hits, self.passages) for question, hits in zip(questions, results)]
            )
        return [hits[:k] for hits in results]

    def record(self, example: Example, hits: Hits) -> RunRecord:
        ctxs: list[Context] = []
        for position, score in hits:
            passage = self._passage(position)
            ctxs.append(
                {"id": passage["id"], "title": passage["title"], "text": passage["text"], "score": round(score, 6)}
            )
        return run_record(example, ctxs)

    def records(self, examples: Sequence[Example]) -> Iterator[RunRecord]:
        size = max(1, self.config.batch_size)
        for start in range(0, len(examples), size):
            batch = examples[start : start + size]
            for example, hits in zip(batch, self.search([e.question for e in batch])):
                yield self.record(example, hits)

    def run_to_file(self, questions: QuestionSet, output: str | Path, progress: bool = True) -> list[RunRecord]:
        """Retrieve for every question, write ``output`` atomically plus ``<output>.manifest.json``."""
        from tqdm import tqdm

        started = time.time()
        records: list[RunRecord] = []
        with (
            atomic_write(output) as handle,
            tqdm(total=len(questions), desc="retrieve", unit="q", disable=not progress) as bar,
        ):
            for record in self.records(questions.examples):
                handle.write(json.dumps(record, ensure_ascii=False) + "\n")
                records.append(record)
                bar.update(1)
        config = self.config
        write_manifest(
            output,
            questions,
            n=len(records),
            k=config.k,
            query_mode=config.query_mode,
            indexes=[
                {
                    "name": r.name,
                    "engine": r.manifest["engine"],
                    "params": r.manifest.get("params"),
                    "corpus": r.manifest.get("corpus"),
                }
                for r in self.retrievers
            ],
            fusion=config.fusion if len(self.retrievers) > 1 else None,
            weights=list(config.weights) if config.weights else None,
            rerankers=[r.describe() if hasattr(r, "describe") else type(r).__name__ for r in self.rerankers],
            seconds=round(time.time() - started, 2),
        )
        return records
