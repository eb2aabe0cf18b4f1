"""FiD training on the shared training loop (``training/loop.py``: AdamW with warm-up and decay,
accumulation, clipping, bf16 on a GPU, compiling, an exact resume from ``state/``): FiD brings its
model, its batches and dev EM with the best checkpoint kept in ``best/``; ``last/`` is the final model."""

from __future__ import annotations

import json
import logging
import random
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path

import torch
from transformers import AutoTokenizer

from ifqa import devices, distributed
from ifqa.artifacts import read_run
from ifqa.devices import numerics, pick_precision
from ifqa.distributed import World
from ifqa.errors import IfqaError
from ifqa.eval.answers import best_over_answers, exact_match
from ifqa.io import atomic_dir, settled
from ifqa.readers.fid import FID_CONFIG, FiDTrainConfig
from ifqa.readers.fid.data import Collator, FiDSettings
from ifqa.readers.fid.model import enable_checkpointing, load_model
from ifqa.readers.fid.predict import predict
from ifqa.training.loop import RESULT, STATE, TRAINER, BestEM, LoopSettings, Trainee, batch_order, run_loop, start

log = logging.getLogger(__name__)


def _save_model(model, tokenizer, settings: FiDSettings, target: Path) -> None:
    """Write a checkpoint folder aside and swap it in (``io.atomic_dir``): a kill never leaves half a
    checkpoint, nor none (the one it replaces is kept aside until the new one is in place)."""
    with atomic_dir(target) as tmp:
        model.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        (tmp / FID_CONFIG).write_text(json.dumps(asdict(settings), indent=2))


def _use_compile(config: FiDTrainConfig, device: str) -> bool:
    """``--compile`` where it can run (else one line, before any work); by default on CUDA when it can."""
    if config.compile and config.no_compile:
        raise IfqaError("--compile and --no-compile contradict each other; give one")
    if config.no_compile or not (config.compile or device.startswith("cuda")):
        return False
    reason = devices.compile_unavailable(device)  # looked up at call time: a test stands in for it
    if reason and config.compile:
        raise IfqaError(f"--compile: {reason} (leave it out to train eagerly)")
    if reason:
        log.info("training eagerly: torch.compile cannot run here (%s)", reason)
    return reason is None


class _Batches:
    """The tensors of micro-step ``g`` (inputs, labels), a pure function of the seed: worker processes
    prepare them ahead of the GPU (``batching.feed``) and a resumed run sees the same data. With a
    compiled model labels are padded to ``answer_maxlength`` (loss unchanged: padded positions are
    ignored and the decoder is causal), so every step has one shape and nothing recompiles."""

    def __init__(
        self, records: Sequence[dict], collator: Collator, config: FiDTrainConfig, fixed_shape: bool, world: World
    ):
        self.records, self.collator, self.config, self.fixed_shape = records, collator, config, fixed_shape
        self.world = world

    def __call__(self, g: int) -> dict:
        config = self.config
        step, micro = divmod(g, config.accumulation)
        batch = [self.records[i] for i in batch_order(len(self.records), config.batch_size, config.seed, g)]
        choice = random.Random(f"{config.seed}:{step}:{micro}")
        labels = self.collator.labels([choice.choice(r["answers"]) for r in batch])
        if self.fixed_shape and labels.shape[1] < config.answer_maxlength:
            labels = torch.nn.functional.pad(labels, (0, config.answer_maxlength - labels.shape[1]), value=-100)
        if not self.world.active:
            return {**self.collator.inputs(batch), "labels": labels}
        # this rank's share of the global batch; the loss is scaled by the global batch's answer tokens
        rows = self.world.share(range(len(batch)))
        return {
            **self.collator.inputs([batch[i] for i in rows]),
            "labels": labels[rows[0] : rows[-1] + 1],
            "global_tokens": (labels != -100).sum(),
        }


def train(
    train_run: str | Path,
    dev_run: str | Path | None,
    output: str | Path,
    config: FiDTrainConfig,
    device: str | None = None,
    progress: bool = True,
    stop_after: int | None = None,
) -> dict:
    """Train FiD on the shared training loop; a rerun resumes from the state saved in ``output``.
    Returns the training record (``step``, ``log``, ``best_em``).

    ``stop_after`` ends this invocation after that many steps (state saved), for time-limited jobs.
    Ctrl-C, SIGTERM and a GPU out of memory stop it after the last whole step, state saved.
    """
    output = Path(output)
    world, device = start(config.seed, device)
    config = config.on(device, world.size)
    world.share(range(config.batch_size))  # a global batch the ranks cannot share equally: one line, now
    settings = LoopSettings(
        config.steps,
        config.lr,
        weight_decay=config.weight_decay,
        save_every=config.save_every,
        precision="fp32" if config.fp32 else "auto",
        seed=config.seed,
        warmup_steps=config.warmup_steps,
        accumulation=config.accumulation,
        max_grad_norm=config.max_grad_norm,
        compile=_use_compile(config, device),
    )
    fid = FiDSettings(config.n_context, config.text_maxlength, config.answer_maxlength)
    train_records = read_run(train_run)
    dev_records = read_run(dev_run) if dev_run else []
    if not train_records:
        raise IfqaError("no training questions", train_run)
    resuming = (settled(output / STATE) / TRAINER).exists() or (output / RESULT).exists()
    if not resuming and (output / "last" / "trainer_state.pt").exists():  # never trained over from step 0
        raise IfqaError(
            "holds a run an earlier ifqa saved (last/trainer_state.pt), which this one cannot resume; finish it "
            "with that version, or train into a new --output",
            output,
        )
    what = {k: v for k, v in asdict(config).items() if k not in FiDTrainConfig.HOW_NOT_WHAT}
    if resuming:
        saved = json.loads((output / "train_config.json").read_text())
        saved.pop("launch", None)  # how the run was launched: it may move between world sizes
        if "bf16" in saved:  # written before the setting was named fp32
            saved["fp32"] = not saved.pop("bf16")
        if {k: v for k, v in saved.items() if k not in FiDTrainConfig.HOW_NOT_WHAT} != what:
            raise IfqaError(
                "this folder holds a run with other settings; use the same options or a new --output", output
            )
    if world.active:  # the group forms before anything is written: a peer that never comes leaves nothing
        distributed.start(device)
    model = load_model(config.model, device)
    tokenizer = AutoTokenizer.from_pretrained(str(config.model))
    precision = pick_precision(settings.precision, device, "train")
    launch = {  # how this run was trained: the world, its batches and what decided the last digits
        "world_size": world.size,
        "global_batch": config.batch_size,
        "batch_per_rank": config.batch_size // world.size,
        "numerics": numerics(device, precision),
    }
    if not resuming and world.main:  # written once the model loads, so a model that cannot leaves nothing behind
        output.mkdir(parents=True, exist_ok=True)
        (output / "train_config.json").write_text(json.dumps({**asdict(config), "launch": launch}, indent=2))
    if config.gradient_checkpointing:  # in a form that compiles to one graph
        enable_checkpointing(model)
    dev = _DevScore(model, tokenizer, dev_records, fid, config, precision == "bf16", world, output)

    def loss_of(inputs: dict, forward):
        tokens = inputs.pop("global_tokens", None)
        loss = forward(**inputs).loss
        if tokens is not None:  # this rank's share of the global batch's mean over answer tokens
            loss = loss * (inputs["labels"] != -100).sum() * world.size / tokens
        return loss

    def save_model(folder: Path) -> None:
        _save_model(model, tokenizer, fid, folder / "last")
        if not dev_records:
            _save_model(model, tokenizer, fid, folder / "best")

    trainee = Trainee(
        model,
        list(model.parameters()),
        range(config.steps * config.accumulation),
        loss_of,
        _Batches(train_records, Collator(tokenizer, fid), config, settings.compile, world),
        save_model,
        dev.after_step,
        dev.state,
        dev.restore,
        memory=(
            f"a batch of {config.batch_size} questions x {config.n_context} passages",
            "memory: the same command with --gradient-checkpointing resumes from the last whole step "
            "(saved), or train into a new --output with a smaller --batch-size and --accumulation",
        ),
    )
    result = run_loop(trainee, output, settings, device, progress, stop_after, world)
    if not result["finished"]:
        log.info("stopped at step %d of %d; rerun the same command to continue", result["step"], config.steps)
    return result


class _DevScore(BestEM):
    """Dev EM every ``eval_every`` steps and at the last, the best checkpoint kept in ``best/``."""

    def __init__(self, model, tokenizer, records, settings, config, bf16: bool, world: World, output: Path):
        self.model, self.tokenizer, self.records, self.settings = model, tokenizer, records, settings
        self.config, self.bf16, self.world, self.output = config, bf16, world, output
        self.best_em = -1.0

    def after_step(self, step: int, entry: dict) -> bool:
        """Score dev when due (the state is then saved, so ``best/`` and the best EM agree on resuming)."""
        if not self.records or (step % self.config.eval_every and step != self.config.steps):
            return False
        model, records, size = self.model, self.records, self.config.eval_batch_size
        share = self.world.blocks(len(records), size)  # each rank predicts its share of whole batches
        mine = predict(model, self.tokenizer, records[share.start : share.stop], self.settings, size, bf16=self.bf16)
        predictions = distributed.gather_objects(mine, self.world)
        correct = sum(best_over_answers(exact_match, p, r["answers"]) for p, r in zip(predictions, records))
        entry["dev_em"] = 100.0 * correct / len(records)
        model.train()
        if entry["dev_em"] > self.best_em:
            self.best_em = entry["dev_em"]
            with distributed.one_writer(self.world) as writes:  # the others wait on the store
                if writes:
                    _save_model(model, self.tokenizer, self.settings, self.output / "best")
        return True
