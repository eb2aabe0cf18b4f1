"""Readers, one package each (``llm``, ``fid``), listed in ``ifqa.registry.READERS``.

A reader entry subclasses ``ReaderEntry``, which declares what the command line and experiments read
of it: ``name``, ``config`` (its configuration dataclass, see ``ifqa.configs``), ``model_key`` (the
field without which it cannot run), ``reads_run`` (whether it takes ``--run``), ``settled(config)`` (the
settings a read runs with, where the model decides some: they name the default output) and
``read(config, job)``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ifqa.artifacts import QuestionSet
from ifqa.configs import to_args
from ifqa.datasets import QuestionSource
from ifqa.errors import IfqaError


class ReaderEntry:
    """The reader interface (see the module); an entry's attributes are read as declared, never probed."""

    name: str
    config: type
    model_key: str | None = "model"  # None: the reader needs no model
    reads_run: bool = True  # False: it retrieves for itself (iterative)

    def settled(self, config):
        """The settings a read will run with, where the model decides some of them (a trained reader's
        card): what names the default output, so that the file says what was read, and what ``read`` is
        given (settling a settled config changes nothing)."""
        return config

    def read(self, config, job: ReadJob) -> dict:
        raise NotImplementedError


@dataclass
class ReadJob:
    """What a reader reads and where its predictions go (the reader's own settings are its config)."""

    questions: QuestionSet
    source: QuestionSource
    output: Path
    run: Path | None = None
    progress: bool = True
    api_key: str | None = None


def refuse_multiple_choice(job: ReadJob, reader: str) -> None:
    """Refuse a multiple-choice set to a reader that cannot show its options (one line, before any work)."""
    if job.questions.task == "mc":
        raise IfqaError(
            f"{job.questions.name} is multiple choice and ifqa read {reader} does not show the options; "
            "read it with ifqa read llm"
        )


def reader_command(name: str, config: Any, source: QuestionSource, run: str | Path | None = None) -> str:
    """The ``ifqa read NAME ...`` command that reruns exactly this configuration."""
    parts = ["ifqa", "read", name, *to_args(config)]
    if run:
        parts += ["--run", str(run)]
    return " ".join(parts + [source.cli_args()])
