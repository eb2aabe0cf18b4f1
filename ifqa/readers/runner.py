"""The run around a reader that prompts a model: questions in waves, a progress bar, the predictions
file and its manifest, here once for the LLM and iterative readers. Resuming is the response cache's:
every reply is stored as it arrives, and the predictions file is written atomically at the end."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from pathlib import Path

from ifqa.artifacts import QuestionSet, write_manifest, write_predictions
from ifqa.llm.session import ModelSession


def read_in_waves(
    session: ModelSession,
    questions: QuestionSet,
    output: str | Path,
    read_wave: Callable[[Sequence], list[dict]],
    *,
    reader: str,
    desc: str,
    manifest: Callable[[list[dict]], dict],
    progress: bool = True,
) -> list[dict]:
    """Every question through ``read_wave`` (one wave of examples -> their records); the predictions
    and ``<output>.manifest.json`` (the reader's name, ``manifest(records)``, the session's backend,
    thinking and counters, the seconds taken) are written once every question has its record."""
    started = time.time()
    records: list[dict] = []
    for wave in session.in_waves(questions.examples, desc, progress):
        records.extend(read_wave(wave))
    write_predictions(output, records)
    write_manifest(
        output,
        questions,
        reader=reader,
        **manifest(records),
        **session.record(),
        seconds=round(time.time() - started, 2),
    )
    return records
