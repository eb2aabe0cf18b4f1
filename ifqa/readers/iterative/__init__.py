"""Iterative reading (``ifqa read iterative``, docs/readers.md): the model asks for evidence while it
reasons, over any retrieval ``ifqa retrieve`` does (the API's ``Pipeline``, opened once per run), through
the same ``ModelSession`` as ``read llm``; each question's steps are recorded in its prediction."""

from __future__ import annotations

import logging
import statistics
import time
from dataclasses import asdict
from pathlib import Path

from ifqa.eval.passages import GoldMatcher
from ifqa.llm.session import Ask, ModelSession
from ifqa.readers import ReaderEntry, refuse_multiple_choice, runner
from ifqa.readers.iterative.config import IterativeConfig
from ifqa.readers.iterative.loop import NO_PASSAGES, SEARCHED_BEFORE, Trace, add_passages, read_step
from ifqa.readers.llm.prompts import load_whole_prompt, number_passages

log = logging.getLogger(__name__)

#: Tokens of one step of a model that does not think.
STEP_MAX_TOKENS = 256


def load_template(config: IterativeConfig) -> tuple[str, str]:
    """The protocol's template (``iterative_search.txt`` or ``iterative_ircot.txt``), checked, and its SHA-256."""
    name = f"iterative_{config.protocol.replace('-tags', '')}"
    text, digest = load_whole_prompt(name, ("question", "transcript"), config.prompts_dir, optional=("passages",))
    return text.strip("\n"), digest


class IterativeReader:
    def __init__(self, session: ModelSession, config: IterativeConfig, pipeline, template: tuple[str, str]):
        self.session, self.config, self.pipeline = session, config, pipeline
        self.template, self.prompt_sha256 = template
        self.host_seconds: list[float] = []  # per step: prompts, retrieval and parsing (the model's time apart)

    def ask(self) -> Ask:
        """A step's request: search tags end the turn wherever they stand (a thinking model's search
        too); an IRCoT step is one line of the answer after any thinking."""
        ending = {"ends": ("</search>", "</answer>")} if self.config.protocol == "search-tags" else {"stops": ("\n",)}
        return Ask(self.session.max_tokens(STEP_MAX_TOKENS), 0.0, self.config.seed, **ending)

    def prompt(self, trace: Trace) -> str | None:
        """The step's prompt with the newest passages that fit: at most ``--passages``, the oldest
        leaving first while the prompt exceeds ``--max-prompt-tokens``. None: the model's own text
        no longer fits even with no passage shown."""
        window = list(trace.shown)[-self.config.passages :]
        while True:
            text = self.template.format(
                question=trace.example.question,
                transcript=trace.transcript(set(window)),
                passages=number_passages([trace.shown[i] for i in window]) if window else NO_PASSAGES,
            )
            if self.session.count_tokens(text) <= self.config.max_prompt_tokens:
                return text
            if not window:
                return None
            window.pop(0)

    def search(self, traces: list[Trace], queries: list[str | None]) -> None:
        """One batch search for the queries of a step; each trace gets its new passages (and, with the
        search-tags protocol, a result block in its transcript)."""
        asked = [(t, q) for t, q in zip(traces, queries) if q and q not in t.searched]
        found = self.pipeline.batch_search([q for _, q in asked]) if asked else []
        hits = {id(t): h for (t, _), h in zip(asked, found)}
        for trace, query in zip(traces, queries):
            if not query:
                continue
            step = trace.steps[-1]
            if query in trace.searched:
                step["repeated"] = True
                block: list[str] = [SEARCHED_BEFORE]
            else:
                trace.searched.add(query)
                block = add_passages(trace, step, hits.get(id(trace), [])) or [NO_PASSAGES]
            if self.config.protocol == "search-tags":
                trace.parts.append(block)

    def read(self, examples: list) -> list[dict]:
        ircot = self.config.protocol == "ircot"
        traces = [Trace(e, GoldMatcher(e.context), sentences=ircot) for e in examples]
        if ircot:  # IRCoT retrieves with the question before the first sentence
            for trace, hits in zip(traces, self.pipeline.batch_search([e.question for e in examples])):
                trace.searched.add(trace.example.question)
                trace.steps.append({"query": trace.example.question, "text": ""})
                add_passages(trace, trace.steps[-1], hits)
        ask = self.ask()
        for _ in range(self.config.max_steps):
            started = time.perf_counter()
            active, prompts = [], []
            for trace in (t for t in traces if not t.done):
                prompt = self.prompt(trace)
                if prompt is None:
                    trace.stopped = "window"
                    log.warning(
                        "question %s: its reasoning outgrew --max-prompt-tokens %d at step %d; stopped without "
                        "an answer (raise --max-prompt-tokens)",
                        trace.example.qid,
                        self.config.max_prompt_tokens,
                        len(trace.steps) + 1,
                    )
                    continue
                active.append(trace)
                prompts.append(prompt)
            if not active:
                break
            between = time.perf_counter()
            replies = self.session.ask(prompts, ask)
            resumed = time.perf_counter()
            queries = [read_step(t, r, self.config.protocol) for t, r in zip(active, replies)]
            self.search(active, queries)
            host = (between - started) + (time.perf_counter() - resumed)
            self.host_seconds.extend([host / len(active)] * len(active))
        for trace in traces:
            if not trace.done:
                trace.stopped = "budget"
        return [t.record() for t in traces]


def read_to_file(reader: IterativeReader, questions, output: str | Path, progress: bool = True) -> list[dict]:
    def manifest(records: list[dict]) -> dict:
        return {
            "config": asdict(reader.config.public()),
            "prompt_sha256": reader.prompt_sha256,
            "retrieval": reader.pipeline.describe(),
            "steps": {"mean": round(statistics.fmean(len(r["steps"]) for r in records), 2)} if records else {},
            "host_ms_per_step": round(1000 * statistics.fmean(reader.host_seconds), 2) if reader.host_seconds else None,
        }

    return runner.read_in_waves(
        reader.session,
        questions,
        output,
        reader.read,
        reader="iterative",
        desc=f"read ({reader.config.protocol})",
        manifest=manifest,
        progress=progress,
    )


class IterativeReaderEntry(ReaderEntry):
    """Iterative: the model searches as it reasons (search tags, or IRCoT), over any index ifqa retrieve takes."""

    name = "iterative"
    reads_run = False  # it retrieves for itself
    config = IterativeConfig
    model_key = "model"

    def read(self, config: IterativeConfig, job) -> dict:
        from ifqa.retrieval.pipeline import RetrievalPipeline  # the API's Pipeline, which stands on this

        refuse_multiple_choice(job, "iterative")
        config.require_model()
        template = load_template(config)  # a template ifqa cannot fill: one line before any index or model
        pipeline = RetrievalPipeline(config.retrieval())  # a spec that does not open: one line before any model
        session = ModelSession.open(config, job.api_key)
        reader = IterativeReader(session, config, pipeline, template)
        read_to_file(reader, job.questions, job.output, job.progress)
        return session.counters.as_dict()


READER = IterativeReaderEntry()
