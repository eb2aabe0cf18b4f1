"""Prompted LLM readers: closed-book (qa), chain-of-thought (cot), GenRead and open-book.

Questions are processed in waves; every completion goes through the response cache first and is
stored the moment it arrives, so an interrupted run loses nothing and a rerun sends only what is
missing. The predictions file is written atomically at the end, with a manifest beside it.
"""

from __future__ import annotations

import logging
import statistics
import time
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from ifqa.artifacts import QuestionSet, as_question_set, check_questions, read_run, write_manifest, write_predictions
from ifqa.errors import IfqaError
from ifqa.llm import thinking
from ifqa.llm.backends import GenerationParams
from ifqa.llm.cache import ResponseCache
from ifqa.llm.generation import CachedGenerator, Counters, estimate_tokens
from ifqa.readers.llm import answers, prompts
from ifqa.readers.llm.config import LLMReaderConfig

log = logging.getLogger(__name__)


class LLMReader:
    def __init__(
        self,
        backend,
        config: LLMReaderConfig,
        train: Sequence,
        cache: ResponseCache | None = None,
        exclude_questions: set[str] | None = None,
        rationale_setting: str = "demo",
        keep_prompts: bool = False,
        task: str = "qa",
    ):
        self.backend, self.config, self.task = backend, config, task
        self.keep_prompts = keep_prompts  # put each prompt's text in its record (ifqa serve shows it)
        self.counters = Counters()
        self.generate = CachedGenerator(backend, cache, config.concurrency, self.counters)
        self.template = prompts.load_template(
            prompts.template_name(config.mode, config.cot, task, config.prompts_dir), config.prompts_dir
        )
        reasoning = prompts.needs_rationale(self.template.name)
        rationales = prompts.load_rationales(rationale_setting, config.prompts_dir) if reasoning else None
        demo_pool = prompts.pool(train, rationales, exclude_questions or set(), self._shown)
        if reasoning and config.demos and not demo_pool:
            raise IfqaError(
                f"no chain-of-thought rationales for the {rationale_setting} training questions "
                "(prompts/rationales.jsonl); use --demos 0 or add some"
            )
        self.selector = prompts.DemoSelector(demo_pool, config.demos, config.selection, config.seed)
        self.reasoning = reasoning
        if config.mode == "genread":
            self.background_template = prompts.load_template("genread_background", config.prompts_dir)
            self.background_selector = prompts.DemoSelector(
                prompts.pool(train, None, exclude_questions or set()), config.demos, config.selection, config.seed
            )
        self.thinks = config.thinks(backend)
        self.count_tokens = getattr(backend, "count_tokens", estimate_tokens)
        window = config.max_prompt_tokens
        if window is None:
            context = getattr(backend, "context_window", lambda: None)()
            window = prompt_budget(context, self._max_tokens(), self.thinks)
        self.budget = window
        self.prompt_lengths: list[int] = []

    def _shown(self, example) -> tuple[str, str]:
        """A demonstration's question and answer as the task writes them in a prompt."""
        return answers.shown_question(example, self.task), answers.shown_answer(example, self.task)

    def _max_tokens(self, background: bool = False) -> int:
        if self.config.max_tokens:
            return self.config.max_tokens
        if self.thinks:
            return self.config.thinking_max_tokens()
        return 256 if (self.reasoning or background) else 64 if self.task == "causalqa" else 32

    def _stops(self, background: bool = False) -> tuple[str, ...]:
        return ("\nQuestion:",) if (self.reasoning or background or self.thinks) else ("\nQuestion:", "\n\n")

    def _params(self, background: bool = False) -> list[GenerationParams]:
        # a thinking model is sent no stop sequence (its thinking has blank lines): they cut its answer instead
        stops = () if self.thinks else self._stops(background)
        samples = 1 if background else self.config.samples
        temperature = 0.0 if background else self.config.effective_temperature
        return [
            self.config.params(self._max_tokens(background), temperature, stops, self.config.seed + s)
            for s in range(samples)
        ]

    def _reply(self, completion, background: bool = False) -> thinking.Reply:
        """The completion's answer text (cut at the stops), its thinking, and whether it was cut off thinking."""
        reply = thinking.split(completion.text, completion.reasoning, completion.finish_reason, self.thinks)
        answer = thinking.cut_at_stops(reply.answer, self._stops(background))
        return thinking.Reply(answer, reply.thinking, reply.truncated)

    def _prompt(self, template, selector, example, passages) -> prompts.Prompt:
        demos = selector.select(example.qid, example.question)
        question = answers.shown_question(example, self.task)
        prompt = prompts.fit(template, question, demos, passages, self.count_tokens, self.budget)
        for note in prompt.notes:
            log.info("question %s: %s", example.qid, note)
        self.prompt_lengths.append(prompt.tokens)
        return prompt

    def read_batch(self, examples: Sequence, contexts: dict[str, list[dict]]) -> list[dict]:
        backgrounds: dict[str, str] = {}
        if self.config.mode == "genread":
            built = [self._prompt(self.background_template, self.background_selector, e, []) for e in examples]
            params = self._params(background=True)[0]
            for example, completion in zip(examples, self.generate([p.text for p in built], [params] * len(built))):
                backgrounds[example.qid] = self._reply(completion, background=True).answer.strip()
        records_prompts, flat_prompts, flat_params = [], [], []
        for example in examples:
            if self.config.mode == "open":
                passages = contexts.get(example.qid, [])[: self.config.passages]
            elif self.config.mode == "context":
                passages = list(example.context)
            elif self.config.mode == "genread":
                passages = [backgrounds[example.qid]]
            else:
                passages = []
            prompt = self._prompt(self.template, self.selector, example, passages)
            records_prompts.append(prompt)
            for params in self._params():
                flat_prompts.append(prompt.text)
                flat_params.append(params)
        completions = self.generate(flat_prompts, flat_params)
        samples = self.config.samples
        records = []
        for n, (example, prompt) in enumerate(zip(examples, records_prompts)):
            outputs = completions[n * samples : (n + 1) * samples]
            replies = [self._reply(c) for c in outputs]
            parsed = [
                ("", "")
                if r.truncated
                else answers.for_task(*answers.extract(r.answer, self.reasoning), self.task, example)
                for r in replies
            ]
            answered = [i for i, r in enumerate(replies) if not r.truncated]
            prediction = answers.majority([parsed[i][0] for i in answered])  # a sample cut off thinking has no vote
            chosen = next((i for i in answered if parsed[i][0] == prediction), 0)
            record: dict[str, Any] = {
                "qid": example.qid,
                "prediction": prediction,
                "raw": outputs[chosen].text,
                "reasoning": "\n\n".join(t for t in (replies[chosen].thinking, parsed[chosen][1]) if t),
            }
            if not answered:  # every sample was cut off inside its thinking: no answer, never a draft
                record["truncated"] = True
                self.counters.truncated += 1
            if self.thinks:
                record["reasoning_tokens"] = outputs[chosen].reasoning_tokens
            if samples > 1:
                record["samples"] = [a for a, _ in parsed]
            if example.qid in backgrounds:
                record["background"] = backgrounds[example.qid]
            record.update({"demos": prompt.demos, "passages": prompt.passages, "prompt_tokens": prompt.tokens})
            if self.keep_prompts:
                record["prompt"] = prompt.text
            if prompt.notes:
                record["fit"] = prompt.notes
            records.append(record)
        return records


def prompt_budget(context: int | None, max_tokens: int, thinks: bool) -> int:
    """Tokens left for the prompt: the model's window less what it may generate (a window of 4096 assumed
    when unknown; a thinking model's prompt gets 4096, its window being larger than its generation)."""
    if context is None:
        return 4096 if thinks else 4096 - max_tokens
    if context - max_tokens < 64:
        raise IfqaError(
            f"--max-tokens {max_tokens} leaves no room for the prompt in the model's {context}-token window; "
            "lower --max-tokens (or --thinking-budget)"
        )
    return context - max_tokens


def load_contexts(run_path: str | Path | None, questions: QuestionSet) -> dict[str, list[dict]]:
    if not run_path:
        return {}
    records = read_run(run_path)
    check_questions(run_path, questions, records)
    return {r["qid"]: r["ctxs"] for r in records}


def read_to_file(
    reader: LLMReader,
    questions: QuestionSet,
    output: str | Path,
    run_path: str | Path | None = None,
    progress: bool = True,
    contexts: dict[str, list[dict]] | None = None,
) -> list[dict]:
    """Answer every question; predictions JSONL and ``<output>.manifest.json`` are written at the end.
    ``contexts``: ``load_contexts(run_path, questions)``, where the caller has them already."""
    from tqdm import tqdm

    questions = as_question_set(questions)
    examples = questions.examples
    if contexts is None:
        contexts = load_contexts(run_path, questions)
    if reader.config.mode == "open":
        if not contexts:
            raise IfqaError("open-book reading needs --run (a run file with retrieved passages)")
        missing = [e.qid for e in examples if e.qid not in contexts]
        if missing:
            raise IfqaError(
                f"{len(missing)} questions have no retrieved passages in the run (e.g. qid {missing[0]})", run_path
            )
    started = time.time()
    wave = reader.generate.wave
    records: list[dict] = []
    with tqdm(total=len(examples), desc=f"read ({reader.config.mode})", unit="q", disable=not progress) as bar:
        for start in range(0, len(examples), wave):
            records.extend(reader.read_batch(examples[start : start + wave], contexts))
            bar.update(min(wave, len(examples) - start))
            bar.set_postfix(reader.counters.public(), refresh=False)
    write_predictions(output, records)
    lengths = reader.prompt_lengths
    write_manifest(
        output,
        questions,
        reader="llm",
        run=str(run_path) if run_path else None,
        config=asdict(reader.config.public()),
        temperature=reader.config.effective_temperature,
        backend=reader.backend.describe(),
        thinks=reader.thinks,
        max_tokens=reader._max_tokens(),
        counters=reader.counters.public(),
        prompt_tokens={"mean": round(statistics.fmean(lengths), 1), "max": max(lengths), "min": min(lengths)}
        if lengths
        else {},
        seconds=round(time.time() - started, 2),
    )
    return records
