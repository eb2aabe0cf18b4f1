"""Prompted LLM readers: closed-book (qa), chain-of-thought (cot), GenRead and open-book.

The model is a ``ModelSession`` (cache, counters, thinking split off); questions go through the
reader runner in waves (``readers.runner``), so an interrupted run loses nothing and a rerun sends
only what is missing. The predictions file is written atomically at the end, with a manifest.
"""

from __future__ import annotations

import logging
import statistics
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from ifqa.artifacts import QuestionSet, as_question_set, check_questions, read_run
from ifqa.errors import IfqaError
from ifqa.eval.answers import is_non_answer
from ifqa.llm.session import Ask, ModelSession, Reply
from ifqa.readers import runner
from ifqa.readers.llm import answers, prompts
from ifqa.readers.llm.config import LLMReaderConfig
from ifqa.readers.llm.trained import as_trained, card_record

log = logging.getLogger(__name__)


class LLMReader:
    def __init__(
        self,
        session: ModelSession,
        config: LLMReaderConfig,
        train: Sequence,
        exclude_questions: set[str] | None = None,
        rationale_setting: str = "demo",
        keep_prompts: bool = False,
        task: str = "qa",
    ):
        config = as_trained(config)  # a model ifqa train llm made reads with the prompts it was trained on
        self.session, self.config, self.task = session, config, task
        self.keep_prompts = keep_prompts  # put each prompt's text in its record (ifqa serve shows it)
        self.template = prompts.load_template(
            config.template or prompts.template_name(config.mode, config.cot, task, config.prompts_dir),
            config.prompts_dir,
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
        self.budget, self.remedy = prompt_limit(
            config, session.backend.context_window(), self._max_tokens(), session.thinks, session.template_tokens()
        )
        self.prompt_lengths: list[int] = []

    def _shown(self, example) -> tuple[str, str]:
        """A demonstration's question and answer as the task writes them in a prompt."""
        return answers.shown_question(example, self.task), answers.shown_answer(example, self.task)

    def _max_tokens(self, background: bool = False) -> int:
        plain = 256 if (self.reasoning or background) else 64 if self.task == "causalqa" else 32
        return self.session.max_tokens(plain)

    def _asks(self, background: bool = False) -> list[Ask]:
        """One ``Ask`` per sample (a background is written once, greedily)."""
        long = self.reasoning or background or self.session.thinks
        stops = ("\nQuestion:",) if long else ("\nQuestion:", "\n\n")
        samples = 1 if background else self.config.samples
        temperature = 0.0 if background else self.config.effective_temperature
        return [Ask(self._max_tokens(background), temperature, self.config.seed + s, stops) for s in range(samples)]

    def _prompt(self, template, selector, example, passages) -> prompts.Prompt:
        demos = selector.select(example.qid, example.question)
        question = answers.shown_question(example, self.task)
        prompt = prompts.fit(template, question, demos, passages, self.session.count_tokens, self.budget, self.remedy)
        for note in prompt.notes:
            log.info("question %s: %s", example.qid, note)
        self.prompt_lengths.append(prompt.tokens)
        return prompt

    def prompt_for(self, example, contexts: dict[str, list[dict]], background: str | None = None) -> prompts.Prompt:
        """The prompt this reader sends for ``example`` (``ifqa train llm`` trains on exactly it): the
        mode's passages (the run's top ones, the question's own, or its GenRead ``background``)."""
        if self.config.mode == "open":
            passages = contexts.get(example.qid, [])[: self.config.passages]
        elif self.config.mode == "context":
            passages = list(example.context)
        elif self.config.mode == "genread":
            passages = [background or ""]
        else:
            passages = []
        return self._prompt(self.template, self.selector, example, passages)

    def read_batch(self, examples: Sequence, contexts: dict[str, list[dict]]) -> list[dict]:
        backgrounds: dict[str, str] = {}
        if self.config.mode == "genread":
            built = [self._prompt(self.background_template, self.background_selector, e, []) for e in examples]
            written = self.session.ask([p.text for p in built], self._asks(background=True)[0])
            for example, reply in zip(examples, written):
                backgrounds[example.qid] = reply.answer.strip()
        records_prompts, flat_prompts, flat_asks = [], [], []
        for example in examples:
            prompt = self.prompt_for(example, contexts, backgrounds.get(example.qid))
            records_prompts.append(prompt)
            for ask in self._asks():
                flat_prompts.append(prompt.text)
                flat_asks.append(ask)
        every = self.session.ask(flat_prompts, flat_asks)
        samples = self.config.samples
        return [
            self._record(example, prompt, every[n * samples : (n + 1) * samples], backgrounds.get(example.qid))
            for n, (example, prompt) in enumerate(zip(examples, records_prompts))
        ]

    def _record(self, example, prompt: prompts.Prompt, replies: list[Reply], background: str | None) -> dict:
        """A question's record from its samples' replies (a sample cut off thinking has no vote)."""
        parsed = [
            ("", "")
            if r.truncated
            else answers.for_task(*answers.extract(r.answer, self.reasoning), self.task, example)
            for r in replies
        ]
        answered = [i for i, r in enumerate(replies) if not r.truncated]
        prediction = answers.majority([parsed[i][0] for i in answered])
        chosen = next((i for i in answered if parsed[i][0] == prediction), 0)
        record: dict[str, Any] = {
            "qid": example.qid,
            "prediction": prediction,
            "raw": replies[chosen].raw,
            "reasoning": "\n\n".join(t for t in (replies[chosen].thinking, parsed[chosen][1]) if t),
        }
        if not answered:  # every sample was cut off inside its thinking: no answer, never a draft
            record["truncated"] = True
        elif is_non_answer(prediction):  # kept as the model said it; the scorer counts it apart
            record["abstained"] = True
        if self.session.thinks:
            record["reasoning_tokens"] = replies[chosen].completion.reasoning_tokens
        if len(replies) > 1:
            record["samples"] = [a for a, _ in parsed]
        if background is not None:
            record["background"] = background
        record.update({"demos": prompt.demos, "passages": prompt.passages, "prompt_tokens": prompt.tokens})
        if self.keep_prompts:
            record["prompt"] = prompt.text
        if prompt.notes:
            record["fit"] = prompt.notes
        return record


def prompt_limit(config, context: int | None, max_tokens: int, thinks: bool, template: int = 0) -> tuple[int, str]:
    """The prompt's token budget and what the user can change to widen it, named by the options that
    set it: ``--max-prompt-tokens`` (refused where it, the chat template's ``template`` tokens and
    ``--max-tokens`` overflow the model's window), else the model's window (``--context-window``; 4096
    when unknown, all of it a thinking model's, its window being larger than its generation) less the
    template and ``--max-tokens``."""
    given = config.max_prompt_tokens
    if given is not None:
        if context is not None and given + template + max_tokens > context:
            raise IfqaError(
                f"--max-prompt-tokens {given}, the chat template's {template} and {max_tokens} tokens to generate "
                f"exceed the model's {context}-token window; lower --max-prompt-tokens (or --max-tokens), or raise "
                "--context-window"
            )
        return given, "raise --max-prompt-tokens or lower --passages"
    remedy = "raise --context-window, or lower --max-tokens or --passages"
    if context is None:
        return (4096 if thinks else 4096 - max_tokens) - template, remedy
    if context - max_tokens < 64:
        raise IfqaError(
            f"--max-tokens {max_tokens} leaves no room for the prompt in the model's {context}-token window; "
            "lower --max-tokens (or --thinking-budget)"
        )
    return context - max_tokens - template, remedy


def check_contexts(mode: str, questions: QuestionSet, contexts: dict, run_path) -> None:
    """Open-book reading's passages: a run, holding every question (refused before any model is made)."""
    if mode != "open":
        return
    if not contexts:
        raise IfqaError("open-book reading needs --run (a run file with retrieved passages)")
    missing = [e.qid for e in questions.examples if e.qid not in contexts]
    if missing:
        raise IfqaError(
            f"{len(missing)} questions have no retrieved passages in the run (e.g. qid {missing[0]})", run_path
        )


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
    questions = as_question_set(questions)
    if contexts is None:
        contexts = load_contexts(run_path, questions)
    check_contexts(reader.config.mode, questions, contexts, run_path)

    def manifest(records: list[dict]) -> dict:
        lengths = reader.prompt_lengths
        return {
            "run": str(run_path) if run_path else None,
            "config": asdict(reader.config.public()),
            "temperature": reader.config.effective_temperature,
            "max_tokens": reader._max_tokens(),
            "card": card_record(reader.config),
            "prompt_tokens": {"mean": round(statistics.fmean(lengths), 1), "max": max(lengths), "min": min(lengths)}
            if lengths
            else {},
        }

    return runner.read_in_waves(
        reader.session,
        questions,
        output,
        lambda wave: reader.read_batch(wave, contexts),
        reader="llm",
        desc=f"read ({reader.config.mode})",
        manifest=manifest,
        progress=progress,
    )
