"""What `ifqa serve` answers, without any web code: one question in, every pipeline stage out.

``QAService`` holds the loaded indexes, the optional reranker and the optional LLM reader. It runs
the same stages as ``ifqa retrieve`` and ``ifqa read`` (the retrieval pipeline, ``rerank_hits``,
``LLMReader.read_batch``), but keeps what a person wants to see: the query formulations, each
passage's rank before and after reranking, and the prompt the reader saw.

Models and indexes are shared by all requests and not all of them are safe to call from several
threads at once (the SQLite response cache, tokenizers), so each stage runs under a lock; every
request builds its own result objects, so answers are never mixed.
"""

from __future__ import annotations

import contextlib
import hashlib
import re
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from ifqa.api import Pipeline, Reranker
from ifqa.artifacts import Example
from ifqa.datasets import QuestionSource
from ifqa.errors import IfqaError
from ifqa.eval.answers import best_over_answers, exact_match
from ifqa.eval.passages import run_record
from ifqa.llm.session import ModelSession
from ifqa.readers.llm import demonstration_pool
from ifqa.readers.llm.reader import LLMReader
from ifqa.retrieval.config import DEPENDS_ON, RetrievalConfig
from ifqa.retrieval.queries import clean_cues


@dataclass(frozen=True)
class Limits:
    """What one request may ask for (larger requests get a 4xx, not a slow server)."""

    max_k: int = 100
    max_question_chars: int = 1000
    max_body_bytes: int = 16_384


def normalize(question: str) -> str:
    return " ".join(question.lower().split())


def highlight_terms(question: str) -> list[str]:
    """The question's content words (no counterfactual cue words or stop words), for highlighting."""
    from bm25s.stopwords import STOPWORDS_EN_PLUS

    stop = set(STOPWORDS_EN_PLUS)
    words = re.findall(r"\w+", clean_cues(question).lower())
    return sorted({w for w in words if len(w) >= 3 and w not in stop})


#: the reader a server offers when none is configured: the trained one ifqa ships (SmolLM2 with its IfQA
#: adapter, on llama.cpp in the server's process: no endpoint, no download)
OFFERED_READER = "demo:smollm2-ifqa"


def configure_hint(retrieval: RetrievalConfig) -> str:
    """The command that starts this server with a reader (shown when none is configured): the trained
    reader ifqa ships, or any model behind an OpenAI-compatible endpoint."""
    parts = ["ifqa serve"]
    parts += [f"--index {spec}" for spec in retrieval.indexes if spec != "demo:bm25"]
    if retrieval.rerank:
        parts.append(f"--rerank {retrieval.rerank}")
    return " ".join([*parts, f"--model {OFFERED_READER}"]) + (
        " (the trained reader ifqa ships), or --model MODEL_NAME --base-url http://localhost:8001/v1"
    )


class QAService:
    def __init__(
        self,
        retrieval: RetrievalConfig,
        reader_config=None,
        known: Sequence = (),
        api_key: str | None = None,
        limits: Limits = Limits(),
    ):
        """``reader_config`` is an ``LLMReaderConfig`` (None: search only); ``known`` are
        ``QuestionSource``s whose questions get answer and gold flags when asked verbatim."""
        self.config, self.limits = retrieval, limits
        first_stage = {name: getattr(RetrievalConfig, name) for name in DEPENDS_ON}  # the reranker's settings stay here
        # the reranker runs here, to show ranks
        self.pipeline = Pipeline(replace(retrieval, rerank=None, **first_stage))
        self.reranker = (
            Reranker(
                retrieval.rerank,
                retrieval.rerank_depth,
                retrieval.device,
                retrieval.rerank_runtime,
                precision=retrieval.rerank_precision,
            )
            if retrieval.rerank
            else None
        )
        self.reranker_info = self.reranker.describe() if self.reranker else None
        question_sets = [source.load() for source in known]
        self.known: dict[str, tuple[str, Example]] = {}
        for questions in question_sets:
            for example in questions.examples:
                self.known.setdefault(normalize(example.question), (questions.name, example))
        self.reader_config = reader_config if reader_config is not None and reader_config.model else None
        # WIQA and CausalQA questions are prompted and parsed as their task
        task = question_sets[0].task if question_sets else "qa"
        self.reader = self._reader(reader_config, known, api_key, task) if self.reader_config else None
        # a backend that takes concurrent requests (an HTTP endpoint; the response cache is thread-safe)
        # serves them at once; one that generates in this process, one request at a time
        self.local_reader = bool(self.reader and not self.reader.session.backend.concurrent_requests)
        self._search_lock, self._read_lock = threading.Lock(), threading.Lock()
        self.started = time.time()

    @staticmethod
    def _reader(config, known: Sequence, api_key: str | None, task: str):
        source = known[0] if known else QuestionSource()
        session = ModelSession.open(config, api_key)
        train, setting = demonstration_pool(config, source)
        return LLMReader(session, config, train.examples, rationale_setting=setting, keep_prompts=True, task=task)

    def check(self, question: str, k: int) -> str:
        """The question, stripped; a bad request raises ``IfqaError`` with what is wrong."""
        if not isinstance(question, str) or not question.strip():
            raise IfqaError("the question is empty")
        if len(question) > self.limits.max_question_chars:
            raise IfqaError(f"the question is longer than {self.limits.max_question_chars} characters")
        if not 1 <= k <= self.limits.max_k:
            raise IfqaError(f"k must be between 1 and {self.limits.max_k}, got {k}")
        return question.strip()

    def lookup(self, question: str) -> tuple[str, Example] | None:
        return self.known.get(normalize(question))

    def search(self, question: str, k: int = 10) -> dict[str, Any]:
        """Ranked passages for one question, with the query formulations and both rankings."""
        question = self.check(question, k)
        started = time.perf_counter()
        config = self.config
        with self._search_lock:
            try:
                queries = self.pipeline.formulate([question])[0]
            except IfqaError as exc:  # only the LLM query modes can fail here: their endpoint did
                raise UpstreamError(f"the query rewriting model failed: {exc}") from exc
            depth = max(k, config.rerank_depth) if self.reranker else k
            first = self.pipeline.batch_search([question], depth, [queries])[0]
            hits = self.reranker.rerank(question, first)[:k] if self.reranker else first[:k]
        first_stage = {hit.id: hit for hit in first}
        passages = [
            {
                "rank": hit.rank,
                "first_stage_rank": first_stage[hit.id].rank,
                "score": round(hit.score, 4),
                "first_stage_score": round(first_stage[hit.id].score, 4),
                "id": hit.id,
                "title": hit.title,
                "text": hit.text,
            }
            for hit in hits
        ]
        known = self.lookup(question)
        if known is not None:
            split, example = known
            flagged = run_record(example, [dict(p) for p in passages])["ctxs"]
            for passage, ctx in zip(passages, flagged):
                passage["has_answer"], passage["gold"] = ctx["has_answer"], ctx["gold"]
        return {
            "question": question,
            "k": k,
            "query_mode": config.query_mode,
            "queries": list(queries),
            "indexes": [r.name for r in self.pipeline.retrievers],
            "reranker": self.reranker_info,
            "known": ({"split": known[0], "qid": known[1].qid, "answers": known[1].answers} if known else None),
            "terms": highlight_terms(question),
            "passages": passages,
            "seconds": round(time.perf_counter() - started, 4),
        }

    def answer(self, question: str, k: int = 10) -> dict[str, Any]:
        """The search result plus the reader's answer, reasoning and prompt."""
        if self.reader is None:
            raise ReaderMissing(f"no reader is configured; start the server with one: {configure_hint(self.config)}")
        result = self.search(question, k)
        question = result["question"]
        started = time.perf_counter()
        known = self.lookup(question)
        if self.reader_config.mode == "context" and not known:
            raise IfqaError(
                "--mode context reads a question's own passages (WIQA's procedure, CausalQA's source "
                "passage); this question is not in the loaded split"
            )
        asked = Example(f"ask-{hashlib.sha1(question.encode()).hexdigest()[:12]}", question, [])
        example = known[1] if known else asked
        contexts = {example.qid: [{"title": p["title"], "text": p["text"]} for p in result["passages"]]}
        with self._read_lock if self.local_reader else contextlib.nullcontext():
            try:
                record = self.reader.read_batch([example], contexts)[0]
            except IfqaError as exc:
                raise UpstreamError(f"the reader's model failed: {exc}") from exc
        result["answer"] = {
            "prediction": record["prediction"],
            "reasoning": record.get("reasoning", ""),
            "raw": record["raw"],
            "prompt": record.get("prompt", ""),
            "model": self.reader_config.model,
            "mode": self.reader_config.mode,
            "passages_in_prompt": record["passages"],
            "demos": record["demos"],
            "background": record.get("background"),
            "seconds": round(time.perf_counter() - started, 4),
        }
        if known:
            result["answer"]["correct"] = bool(best_over_answers(exact_match, record["prediction"], known[1].answers))
        return result

    def health(self) -> dict[str, Any]:
        retrievers, reader = self.pipeline.retrievers, self.reader_config
        return {
            "status": "ok",
            "uptime_s": round(time.time() - self.started, 1),
            "indexes": [
                {"name": r.name, "engine": r.manifest.get("engine"), "passages": len(r.passages)} for r in retrievers
            ],
            "query_mode": self.config.query_mode,
            "reranker": self.reranker_info,
            "reader": reader and {"model": reader.model, "mode": reader.mode, "backend": reader.backend_name},
            "reader_hint": None if reader else f"start it with: {configure_hint(self.config)}",
            "known_questions": len(self.known),
            "limits": vars(self.limits),
        }


class ReaderMissing(IfqaError):
    """Asked for an answer from a server started without a reader."""


class UpstreamError(IfqaError):
    """The LLM endpoint failed (after the backend's retries)."""
