"""Retrieve passages for a question set and write the run file (DPR/FiD retrieval JSON, one line each)."""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path
from typing import Any, Sequence

from ifqa import __version__
from ifqa.errors import IfqaError
from ifqa.evaluation import GoldMatcher, flag_contexts
from ifqa.io import atomic_write, write_json
from ifqa.retrieval.fusion import FUSIONS
from ifqa.retrieval.index import Retriever

log = logging.getLogger(__name__)


def check_same_collection(retrievers: Sequence[Retriever]) -> None:
    """Fusion merges passage positions, so every index must cover the same collection."""
    checksums = {r.manifest.get("corpus", {}).get("sha256") for r in retrievers}
    if len(checksums) > 1:
        raise IfqaError("hybrid retrieval needs indexes of the same collection (their corpus checksums differ)")


def search(retrievers: Sequence[Retriever], queries: Sequence[str], k: int, fusion: str = "rrf",
           weights: Sequence[float] | None = None, threads: int = 1, depth: int | None = None) -> list[list[tuple[int, float]]]:
    """Top-k for each query from one retriever, or fused from several (each asked for ``depth``)."""
    if len(retrievers) == 1:
        return retrievers[0].search(queries, k, threads)
    if weights is not None and len(weights) != len(retrievers):
        raise IfqaError(f"--weights needs one weight per index ({len(retrievers)}), got {len(weights)}")
    per_index = [r.search(queries, depth or max(k, 100), threads) for r in retrievers]
    combine = FUSIONS[fusion]
    return [combine([lists[i] for lists in per_index], k, weights) for i in range(len(queries))]


def run_record(example: Any, ctxs: list[dict]) -> dict[str, Any]:
    """A run line for a question: its passages flagged with ``has_answer`` and ``gold``."""
    flag_contexts(ctxs, example.answers, GoldMatcher(example.context))
    return {"qid": example.qid, "question": example.question, "answers": example.answers, "ctxs": ctxs}


def to_record(example: Any, hits: list[tuple[int, float]], retriever: Retriever) -> dict[str, Any]:
    ctxs = []
    for position, score in hits:
        passage = retriever.passages[position]
        ctxs.append({"id": passage["id"], "title": passage["title"], "text": passage["text"], "score": round(score, 6)})
    return run_record(example, ctxs)


def retrieve_to_file(retrievers: Sequence[Retriever], examples: Sequence[Any], output: str | Path, k: int = 20,
                     fusion: str = "rrf", weights: Sequence[float] | None = None, batch_size: int = 64,
                     threads: int = 1, progress: bool = True, source: str = "") -> list[dict]:
    """Retrieve for every example, write ``output`` atomically plus ``<output>.manifest.json``."""
    from tqdm import tqdm

    if len(retrievers) > 1:
        check_same_collection(retrievers)
    started = time.time()
    records = []
    with atomic_write(output) as handle, tqdm(total=len(examples), desc="retrieve", unit="q", disable=not progress) as bar:
        for start in range(0, len(examples), batch_size):
            batch = examples[start : start + batch_size]
            for example, hits in zip(batch, search(retrievers, [e.question for e in batch], k, fusion, weights, threads)):
                record = to_record(example, hits, retrievers[0])
                handle.write(json.dumps(record, ensure_ascii=False) + "\n")
                records.append(record)
            bar.update(len(batch))
    write_json(f"{output}.manifest.json", {
        "ifqa": __version__, "questions": source, "n": len(records), "k": k,
        "indexes": [{"name": r.name, "engine": r.manifest["engine"], "params": r.manifest.get("params"),
                     "corpus": r.manifest.get("corpus")} for r in retrievers],
        "fusion": fusion if len(retrievers) > 1 else None, "weights": list(weights) if weights else None,
        "seconds": round(time.time() - started, 2),
    })
    return records
