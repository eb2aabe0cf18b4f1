"""Fusion-in-Decoder: ``model`` (FiDT5), ``data`` (inputs), ``train`` and ``predict``.

This module stays light (no torch import) because the command line builds ``ifqa read fid``'s options
from ``FiDReaderConfig`` (``ifqa train fid``'s recipe is ``training/recipes.py: FiDRecipe``).
"""

from __future__ import annotations

from dataclasses import dataclass

from ifqa.configs import option
from ifqa.errors import IfqaError
from ifqa.readers import ReaderEntry, refuse_multiple_choice


@dataclass(frozen=True)
class FiDReaderConfig:
    checkpoint: str | None = option(None, "Training folder (its best/ checkpoint) or a checkpoint folder.")
    beams: int = option(1, "Beam size (1 = greedy).", min=1)
    batch_size: int = option(8, "Questions per generation batch.", min=1)
    n_context: int | None = option(None, "Passages per question (default: the checkpoint's).", min=1)
    device: str | None = option(None, "cpu, cuda ... (default: GPU when present).")

    def output_name(self, label: str) -> str:
        name = (self.checkpoint or "fid").rstrip("/").replace("/", "_")
        return f"{label}-fid-{name}.jsonl"


class FiDReaderEntry(ReaderEntry):
    """Fusion-in-Decoder: a trained T5 checkpoint reads the passages of a run."""

    name = "fid"
    config = FiDReaderConfig
    model_key = "checkpoint"

    def read(self, config: FiDReaderConfig, job) -> dict:
        from ifqa.readers.fid.predict import read_to_file  # torch, for a FiD read alone (the config builds options)

        refuse_multiple_choice(job, "fid")
        if not config.checkpoint or not job.run:
            raise IfqaError("FiD reading needs --checkpoint and --run")
        read_to_file(
            config.checkpoint,
            job.questions,
            job.run,
            job.output,
            batch_size=config.batch_size,
            beams=config.beams,
            device=config.device,
            n_context=config.n_context,
            progress=job.progress,
        )
        return {}


READER = FiDReaderEntry()
