"""The retrieval pipeline: query formulation -> first-stage search over one or more indexes ->
fusion -> reranking -> run records (DPR/FiD retrieval JSON, one question per line).

``ifqa retrieve`` and the experiment runner both build it from a ``RetrievalConfig``, so the two
cannot drift apart. Each stage is a slot: query modes and engines come from the registries, and a
reranker is a ``reordering.RerankerKind`` (every kind, through one interface).
"""

from __future__ import annotations

import functools
import json
import logging
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

from ifqa.artifacts import Example, QuestionSet, RunRecord, write_manifest
from ifqa.devices import cpu_threads, pick_device
from ifqa.errors import IfqaError
from ifqa.eval.passages import run_record
from ifqa.io import atomic_write
from ifqa.registry import QUERY_MODES
from ifqa.retrieval.config import RetrievalConfig, asks_a_model
from ifqa.retrieval.fusion import FUSIONS
from ifqa.retrieval.hits import Hit, hits_at
from ifqa.retrieval.index import Retriever, verify_collection
from ifqa.retrieval.reordering import RerankerKind
from ifqa.retrieval.specs import open_index

log = logging.getLogger(__name__)


class RetrievalPipeline:
    def __init__(
        self,
        config: RetrievalConfig,
        retrievers: Sequence[Retriever] | None = None,
        rerankers: Sequence[RerankerKind] = (),
    ):
        if config.rerank:  # an exported backend on a GPU: its own line, before the device's
            from ifqa.retrieval.exported import Runtime  # optional stages' modules load when used

            Runtime.parse(config.rerank_runtime).check(config.device)
        if config.device:  # checked before an index is opened (or the demo's is built on first use)
            pick_device(config.device)
        self.config = config
        self.retrievers = (
            list(retrievers)
            if retrievers is not None
            else [open_index(spec, config.corpus, config.device) for spec in config.indexes]
        )
        if not self.retrievers:
            raise IfqaError("no index to search: name one or more indexes")
        if config.verify_corpus:
            for retriever in self.retrievers:
                verify_collection(retriever)
        if len(self.retrievers) > 1:  # fusion merges passage positions: every index must cover one collection
            if len({r.manifest.get("corpus", {}).get("sha256") for r in self.retrievers}) > 1:
                raise IfqaError("hybrid retrieval needs indexes of the same collection (their corpus checksums differ)")
        if config.query_encoder:
            from ifqa.retrieval.encoders import use_query_encoder  # the model code of a stage the config asks for

            for retriever in self.retrievers:
                use_query_encoder(retriever, config.query_encoder, config.device)
        formulation = QUERY_MODES.get(config.query_mode)
        self.formulate = (
            formulation.for_config(config)
            if asks_a_model(config.query_mode)
            else lambda questions: [formulation(question) for question in questions]
        )
        self.rerankers = list(rerankers)
        # a run reads the same passage for many questions (half of them recur): parse each once
        self._passage = functools.lru_cache(maxsize=16384)(self.retrievers[0].passages.__getitem__)  # ~1 KB each
        if config.rerank and not rerankers:
            from ifqa.retrieval.rerank import load_reranker  # the model code of a stage the config asks for

            options = {"device": config.device, "backend": config.rerank_runtime, "precision": config.rerank_precision}
            self.rerankers = [load_reranker(config.rerank, config.rerank_depth, **options)]

    def batch_search(
        self, questions: Sequence[str], k: int | None = None, subqueries: Sequence[Sequence[str]] | None = None
    ) -> list[list[Hit]]:
        """Top-k ``Hit`` lists: every (index, sub-query) list, fused when there are several, then reranked.

        ``k`` overrides the configured depth for this call; ``subqueries`` are the questions' query
        formulations when the caller already made them (``ifqa serve`` shows them).
        """
        config = self.config
        k = k or config.k
        subqueries = self.formulate(list(questions)) if subqueries is None else subqueries
        flat = [query for queries in subqueries for query in queries]
        several = len(self.retrievers) > 1 or any(len(queries) > 1 for queries in subqueries)
        wanted = max([k] + [r.depth for r in self.rerankers])  # what fusion must return: the rerankers' heads
        depth = max(wanted, config.depth) if several else wanted

        threads = config.threads or cpu_threads()  # scoring is most of a large collection's time: every core
        per_index = [r.search(flat, depth, threads) for r in self.retrievers]
        weights = config.weights or [1.0] * len(self.retrievers)
        combine = FUSIONS[config.fusion]
        results, start = [], 0
        for queries in subqueries:
            lists = [(weight, hits[start + j]) for weight, hits in zip(weights, per_index) for j in range(len(queries))]
            start += len(queries)
            fused = lists[0][1] if not several else combine([h for _, h in lists], wanted, [w for w, _ in lists])
            results.append(hits_at(fused, self._passage))
        for reranker in self.rerankers:  # the questions' pairs together: a GPU scores them in full batches
            results = reranker.rerank_many(questions, results)
        return [hits[:k] for hits in results]

    def _records(self, examples: Sequence[Example]) -> Iterator[RunRecord]:
        size = max(1, self.config.batch_size)
        for start in range(0, len(examples), size):
            batch = examples[start : start + size]
            for example, hits in zip(batch, self.batch_search([e.question for e in batch])):
                yield run_record(example, [hit.as_context() for hit in hits])

    def run_to_file(self, questions: QuestionSet, output: str | Path, progress: bool = True) -> list[RunRecord]:
        """Retrieve for every question, write ``output`` atomically plus ``<output>.manifest.json``."""
        from tqdm import tqdm

        started = time.time()
        records: list[RunRecord] = []
        with (
            atomic_write(output) as handle,
            tqdm(total=len(questions), desc="retrieve", unit="q", disable=not progress) as bar,
        ):
            for record in self._records(questions.examples):
                handle.write(json.dumps(record, ensure_ascii=False) + "\n")
                records.append(record)
                bar.update(1)
        write_manifest(output, questions, n=len(records), **self.describe(), seconds=round(time.time() - started, 2))
        return records

    def describe(self) -> dict:
        """What this pipeline is, as manifests record it: k, the query mode, each index (its engine,
        settings and collection), the fusion and the rerankers."""
        config = self.config
        return {
            "k": config.k,
            "query_mode": config.query_mode,
            "indexes": [
                {"name": r.name, "engine": r.manifest["engine"], **{k: r.manifest.get(k) for k in ("params", "corpus")}}
                for r in self.retrievers
            ],
            "fusion": config.fusion if len(self.retrievers) > 1 else None,
            "weights": list(config.weights) if config.weights else None,
            "rerankers": [r.describe() for r in self.rerankers],
            **self.rewriting(),
        }

    def rewriting(self) -> dict:
        """The model that wrote the sub-queries (``--query-mode rewrite|hyde``), as every command records
        its model session: backend, whether it thinks, its counters."""
        session = getattr(self.formulate, "session", None)  # a formulation that asked a model keeps its session
        return {"rewriting": session.record()} if session is not None else {}
