"""Iterative reading: the model asks for evidence while it reasons (``ifqa read iterative``).

The retrieval it asks is any ``ifqa retrieve`` can do (an index or spec, several fused, a reranker:
the API's ``Pipeline``, opened once per run, in this process); the model is any ``read llm`` takes,
reasoning models included, through the same cache, retries and concurrency. Each question's steps are
recorded in its prediction (the model's text, the query, the passages and whether each is gold), so
``ifqa evaluate`` reports gold-passage recall over all steps and steps per question.
"""

from __future__ import annotations

import logging
import statistics
import time
from dataclasses import asdict
from pathlib import Path

from ifqa.artifacts import write_manifest, write_predictions
from ifqa.errors import IfqaError
from ifqa.eval.passages import GoldMatcher
from ifqa.llm.backends import GenerationParams
from ifqa.llm.generation import CachedGenerator, Counters, estimate_tokens
from ifqa.readers import without_options
from ifqa.readers.iterative.config import IterativeConfig
from ifqa.readers.iterative.loop import Trace, add_passages, passage_lines, read_step
from ifqa.readers.llm.prompts import prompts_dir

log = logging.getLogger(__name__)


class IterativeReader:
    def __init__(self, backend, config: IterativeConfig, pipeline, cache=None):
        self.backend, self.config, self.pipeline = backend, config, pipeline
        self.counters = Counters()
        self.generate = CachedGenerator(backend, cache, config.concurrency, self.counters)
        path = prompts_dir(config.prompts_dir) / f"iterative_{config.protocol.replace('-tags', '')}.txt"
        if not path.is_file():
            raise IfqaError("no such prompt template", path)
        self.template = path.read_text(encoding="utf-8").strip("\n")
        self.thinks = config.thinks(backend)
        self.count_tokens = getattr(backend, "count_tokens", estimate_tokens)
        self.host_seconds: list[float] = []  # per step: prompts, retrieval and parsing (the model's time apart)

    def params(self) -> GenerationParams:
        stops = (
            () if self.thinks else (("</search>", "</answer>") if self.config.protocol == "search-tags" else ("\n",))
        )
        max_tokens = self.config.max_tokens or (self.config.thinking_max_tokens() if self.thinks else 256)
        return self.config.params(max_tokens, 0.0, stops, self.config.seed)

    def prompt(self, trace: Trace) -> str:
        passages = list(trace.shown.values())[-self.config.passages :]
        text = self.template.format(
            question=trace.example.question, transcript=trace.transcript, passages=passage_lines(passages)
        )
        if self.count_tokens(text) > self.config.max_prompt_tokens:
            raise IfqaError(
                f"question {trace.example.qid!r}: the prompt outgrew --max-prompt-tokens "
                f"{self.config.max_prompt_tokens} at step {len(trace.steps) + 1}; raise it or lower --passages / --k"
            )
        return text

    def search(self, traces: list[Trace], queries: list[str | None]) -> None:
        """One batch search for the queries of a step; each trace gets its new passages (and, with the
        search-tags protocol, a result block in its transcript)."""
        asked = [(t, q) for t, q in zip(traces, queries) if q and q not in t.searched]
        found = self.pipeline.batch_search([q for _, q in asked]) if asked else []
        hits = {id(t): h for (t, _), h in zip(asked, found)}
        for trace, query in zip(traces, queries):
            step = trace.steps[-1] if trace.steps else None
            if query and query in trace.searched:
                step["repeated"] = True
                new: list[dict] = []
            elif query:
                trace.searched.add(query)
                new = add_passages(trace, step, hits.get(id(trace), []), self.config.passages - len(trace.shown))
            else:
                continue
            if self.config.protocol == "search-tags":
                note = "(searched before: see above)" if step.get("repeated") else passage_lines(new)
                trace.transcript += f"<result>\n{note}\n</result>\n"

    def read(self, examples: list) -> list[dict]:
        traces = [Trace(e, GoldMatcher(e.context)) for e in examples]
        if self.config.protocol == "ircot":  # IRCoT retrieves with the question before the first sentence
            for trace, hits in zip(traces, self.pipeline.batch_search([e.question for e in examples])):
                trace.searched.add(trace.example.question)
                trace.steps.append({"query": trace.example.question, "text": ""})
                add_passages(trace, trace.steps[-1], hits, self.config.passages)
        params = self.params()
        for _ in range(self.config.max_steps):
            active = [t for t in traces if not t.done]
            if not active:
                break
            started = time.perf_counter()
            prompts = [self.prompt(t) for t in active]
            between = time.perf_counter()
            completions = self.generate(prompts, [params] * len(prompts))
            resumed = time.perf_counter()
            queries = [read_step(t, c, self.config.protocol, self.thinks) for t, c in zip(active, completions)]
            self.search(active, queries)
            host = (between - started) + (time.perf_counter() - resumed)
            self.host_seconds.extend([host / len(active)] * len(active))
        for trace in traces:
            if not trace.done:
                trace.stopped = "budget"
        return [t.record() for t in traces]


def read_to_file(reader: IterativeReader, questions, output: str | Path, progress: bool = True) -> list[dict]:
    from tqdm import tqdm

    started = time.time()
    wave = reader.generate.wave
    examples, records = questions.examples, []
    with tqdm(total=len(examples), desc=f"read ({reader.config.protocol})", unit="q", disable=not progress) as bar:
        for start in range(0, len(examples), wave):
            records.extend(reader.read(examples[start : start + wave]))
            bar.update(min(wave, len(examples) - start))
    write_predictions(output, records)
    write_manifest(
        output,
        questions,
        reader="iterative",
        config=asdict(reader.config.public()),
        backend=reader.backend.describe(),
        thinks=reader.thinks,
        retrieval=reader.pipeline.describe(),
        counters=reader.counters.public(),
        steps={"mean": round(statistics.fmean(len(r["steps"]) for r in records), 2)} if records else {},
        host_ms_per_step=round(1000 * statistics.fmean(reader.host_seconds), 2) if reader.host_seconds else None,
        seconds=round(time.time() - started, 2),
    )
    return records


class IterativeReaderEntry:
    """Iterative: the model searches as it reasons (search tags, or IRCoT), over any index ifqa retrieve takes."""

    name = "iterative"
    reads_run = False  # it retrieves for itself
    config = IterativeConfig
    model_key = "model"

    def read(self, config: IterativeConfig, job) -> dict:
        from ifqa.retrieval.pipeline import RetrievalPipeline  # the API's Pipeline, which stands on this

        without_options(job, "iterative")
        config.require_model()
        pipeline = RetrievalPipeline(
            config.retrieval()
        )  # a spec that does not open: one line before any model is asked
        backend = config.backend_instance(job.api_key)
        reader = IterativeReader(backend, config, pipeline, config.response_cache())
        read_to_file(reader, job.questions, job.output, job.progress)
        return reader.counters.public()


READER = IterativeReaderEntry()
