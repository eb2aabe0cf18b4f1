"""Prompted LLM readers: closed-book (qa), chain-of-thought (cot), GenRead, open-book and context (own passages).

``config`` holds the settings, ``prompts`` the templates and demonstrations, ``answers`` answer
extraction, ``reader`` the reading loop; models are reached through ``ifqa.llm``.
"""

from __future__ import annotations

import logging

from ifqa.artifacts import QuestionSet
from ifqa.errors import IfqaError
from ifqa.readers import ReaderEntry
from ifqa.readers.llm.config import LLMReaderConfig
from ifqa.readers.llm.trained import as_trained

log = logging.getLogger(__name__)


def demonstration_pool(config: LLMReaderConfig, source):
    """Where demonstrations come from: ``train`` when given, else the named setting's train split.

    Questions given as a file have no setting to take a train split from, so the pool must be named
    (never silently the embedded demo set).
    """
    if config.demos == 0:  # no demonstrations: no pool is read (a set may have no train split: FaithEval)
        return QuestionSet("none", []), "none"
    pool = source.training_source(config.train)
    if pool is None:
        raise IfqaError(
            "with --questions FILE, name the demonstration pool: --train FILE or --setting NAME (or --demos 0)"
        )
    return pool.load(), "file" if config.train else pool.resolved()[0]


class LLMReaderEntry(ReaderEntry):
    """Prompted LLM: closed-book, chain-of-thought, GenRead or open-book, over any OpenAI-compatible endpoint or a local model."""

    name = "llm"
    config = LLMReaderConfig
    model_key = "model"

    def settled(self, config: LLMReaderConfig) -> LLMReaderConfig:
        return as_trained(config)

    def read(self, config: LLMReaderConfig, job) -> dict:
        from ifqa.llm.session import ModelSession  # the model layer, for a read alone (the config builds options)
        from ifqa.readers.llm.reader import LLMReader, check_contexts, load_contexts, read_to_file  # likewise

        config = self.settled(config)  # its mode and passages decide what is checked below
        config.require_model()
        contexts = load_contexts(job.run, job.questions)  # read and checked before any model is loaded or contacted
        check_contexts(config.mode, job.questions, contexts, job.run)
        train, setting = demonstration_pool(config, job.source)  # a pool that cannot be named: before the model loads
        session = ModelSession.open(config, job.api_key)
        if config.demos:
            log.info("demonstrations from %s (%d questions)", train.name, len(train))
        exclude = {e.question.strip() for e in job.questions}
        reader = LLMReader(session, config, train.examples, exclude, rationale_setting=setting, task=job.questions.task)
        read_to_file(reader, job.questions, job.output, job.run, progress=job.progress, contexts=contexts)
        return session.counters.as_dict()


READER = LLMReaderEntry()
