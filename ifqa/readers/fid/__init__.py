"""Fusion-in-Decoder: ``model`` (FiDT5), ``data`` (inputs), ``train`` and ``predict``.

This module stays light (no torch import) because the command line builds ``ifqa read fid``'s
and ``ifqa train fid``'s options from ``FiDReaderConfig`` and ``FiDTrainConfig``.
"""

from __future__ import annotations

from dataclasses import dataclass

from ifqa.configs import option
from ifqa.errors import IfqaError
from ifqa.readers import ReaderEntry, refuse_multiple_choice

FID_CONFIG = "fid.json"  # a FiD checkpoint folder's reading settings (passages, lengths), beside its weights


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


@dataclass(frozen=True)
class FiDTrainConfig:
    """What a FiD training run is; saved beside its checkpoints, so a resume with other settings is
    refused, except for those in ``HOW_NOT_WHAT``: they change speed and memory, not the result."""

    HOW_NOT_WHAT = ("compile", "no_compile", "gradient_checkpointing", "eval_batch_size", "save_every")

    model: str = option("t5-base", "T5 hub id or local folder (t5-base, google/flan-t5-large, ...).")
    steps: int = option(15000, "Optimizer steps in all (the paper trains 15k).", min=1)
    lr: float = option(1e-4, "Peak learning rate (AdamW, linear warm-up and decay).", min=0.0)
    batch_size: int | None = option(
        None,
        "Questions per step, each with --n-context passages, over all ranks under "
        "torchrun/srun (the same flags train the same model on any number of ranks; "
        "default: 8 per GPU, 1 per CPU process, times the ranks).",
        min=1,
    )
    accumulation: int = option(1, "Gradient accumulation steps.", min=1)
    warmup_steps: int = option(1000, "Steps of linear warm-up.", min=0)
    weight_decay: float = option(0.01, "AdamW weight decay.", min=0.0)
    max_grad_norm: float = option(1.0, "Gradients are clipped to this norm.", min=1e-6)
    eval_every: int = option(500, "Dev EM every N steps (with --dev-run).", min=1)
    eval_batch_size: int = option(8, "Questions per generation batch when scoring dev.", min=1)
    save_every: int | None = option(None, "Also save the resumable state every N steps.", min=1)
    seed: int = option(0, "Seed for initialization and data order.")
    gradient_checkpointing: bool = option(False, "Recompute activations to save GPU memory.")
    fp32: bool = option(
        False, "Train in fp32 on GPU (default: bf16 autocast where the GPU runs bf16 natively).", flag="--no-bf16"
    )
    compile: bool = option(
        False,
        "Compile the model with torch.compile (the default on CUDA, where it trains about "
        "2x faster; on a CPU only when asked).",
    )
    no_compile: bool = option(False, "Run the model eagerly, also on CUDA.")
    n_context: int = option(20, "Passages per question fed to the encoder.", min=1)
    text_maxlength: int = option(250, "Tokens per question+passage input.", min=1)
    answer_maxlength: int = option(20, "Tokens per target answer.", min=1)

    def on(self, device: str, ranks: int = 1) -> FiDTrainConfig:
        """The config with its device-dependent defaults filled in (what the run records): without
        ``--batch-size`` each of the ``ranks`` takes 8 questions a step on a GPU, 1 on a CPU, so more
        GPUs train faster; a given ``--batch-size`` is the global batch whatever the world."""
        from dataclasses import replace

        per_rank = 8 if device.startswith("cuda") else 1
        return self if self.batch_size else replace(self, batch_size=per_rank * ranks)


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
