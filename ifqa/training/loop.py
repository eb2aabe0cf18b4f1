"""The one training loop every model ifqa trains runs on (FiD, the reranker, the retriever): a seeded
plan of micro-batches, gradient accumulation, bf16 autocast on a GPU that has it natively (fp32 on a
CPU unless asked: the same losses on every CPU), warm-up then linear decay, fused AdamW on CUDA, an
optional ``torch.compile``, batches prepared ahead by worker processes on CUDA, resumable state
saved atomically every N steps and after the step a Ctrl-C, SIGTERM or a GPU out of memory arrived
in, several ranks under torchrun/srun, and progress with the running loss.

The plan is a pure function of the seed and the state holds the random generators, so a resumed run
continues exactly as an uninterrupted one would. What differs between models (inputs, loss, the
finished model's format, FiD's dev EM) is a ``Trainee``.
"""

from __future__ import annotations

import contextlib
import json
import logging
import random
import shutil
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ifqa import distributed
from ifqa.devices import gpu_index, numerics, pick_precision
from ifqa.distributed import World
from ifqa.errors import IfqaError, check_step, restoring
from ifqa.interrupts import held_interrupts
from ifqa.io import atomic_dir, atomic_write, settled, write_json
from ifqa.models import load_weights
from ifqa.retrieval.batching import feed, out_of_memory_hint, to_device

log = logging.getLogger(__name__)

STATE = "state"
#: What a finished run recorded, written once its model is saved: its presence means training is done,
#: so a run killed after it (while the card is written or dev is scored) finishes without training again.
RESULT = "train_result.json"
#: The trainer's half of a saved state (the model's is ``model.pt``).
TRAINER = "trainer.pt"


@dataclass
class LoopSettings:
    steps: int
    lr: float
    warmup: float = 0.1  # a fraction of the steps, unless warmup_steps is given
    weight_decay: float = 0.01
    save_every: int | None = 200
    precision: str = "auto"  # devices.pick_precision's, for training: bf16 autocast or fp32
    seed: int = 0
    warmup_steps: int | None = None
    accumulation: int = 1
    max_grad_norm: float = 1.0
    compile: bool = False

    def warmup_length(self) -> int:
        return max(1, self.warmup_steps if self.warmup_steps is not None else int(self.warmup * self.steps))


@dataclass
class Trainee:
    """What one kind of model brings to the loop. ``batches[g]`` plans micro-batch g (of ``steps x
    accumulation``); ``prepare`` turns a plan into this rank's inputs (run ahead by worker processes on
    CUDA); ``loss_of(inputs on the device, forward)`` is the micro-batch's loss, ``forward`` the model
    (in DistributedDataParallel under several ranks, compiled when asked). ``after_step(step, entry)``
    may add to the step's log entry (FiD's dev EM) and returns whether to save the state now;
    ``state()``/``restore(saved)`` carry what it keeps across a resume (its best EM), also returned
    with the result. ``save_model(output)`` writes the finished model."""

    model: Any
    parameters: list
    batches: Sequence
    loss_of: Callable[[Any, Callable], Any]
    prepare: Callable[[Any], Any] = lambda plan: plan
    save_model: Callable[[Path], None] | None = None
    after_step: Callable[[int, dict], bool] | None = None
    state: Callable[[], dict] = dict
    restore: Callable[[dict], None] = lambda saved: None
    unused_parameters: bool = False
    #: what a GPU out of memory names: what a batch holds, and what to lower
    memory: tuple[str, str] = ("a training step", "--questions-per-step (the same command resumes)")


def batch_order(n: int, batch_size: int, seed: int, step: int) -> list[int]:
    """The examples of micro-batch ``step``: epochs are seeded permutations, so resuming at any step
    sees exactly the data an uninterrupted run would have seen."""
    per_epoch = max(1, n // batch_size)
    epoch, position = divmod(step, per_epoch)
    order = list(range(n))
    random.Random(seed * 100003 + epoch).shuffle(order)
    return order[position * batch_size : (position + 1) * batch_size]


class BestEM:
    """The best dev EM a reader's run has seen (its ``best/``), carried across a resume in the loop's
    state: a reader's dev scorer subclasses it (FiD's, the LLM reader's)."""

    best_em: float = -1.0

    def state(self) -> dict:
        return {"best_em": self.best_em}

    def restore(self, saved: dict) -> None:
        best = saved.get("best_em", -1.0)
        if not isinstance(best, (int, float)):
            raise TypeError("its 'best_em' is not a number")
        self.best_em = float(best)


def check_saved_state(output: Path) -> None:
    """What of a saved state can be checked before any work (mining takes minutes and writes its
    groups): its files load as weights and the trainer's holds every key at a whole step. The rest
    (the model's shapes, the step against the run's length) is checked when the state is restored."""
    state_dir = settled(Path(output) / STATE)
    if not (state_dir / TRAINER).exists() and not (state_dir / "model.pt").exists():
        return
    start_over = f"delete {state_dir} to train from the start"
    with restoring(state_dir, start_over):
        saved = load_weights(state_dir / TRAINER)
        load_weights(state_dir / "model.pt")
        missing = {"optimizer", "scheduler", "step", "history", "rng"} - set(saved)
        if missing:
            raise KeyError(", ".join(sorted(missing)))
        check_step(saved["step"], saved["step"] if isinstance(saved["step"], int) else 0, state_dir, start_over)


@dataclass(frozen=True)
class Invocation:
    """How one invocation of a training command runs: its device (None: a GPU when present), a progress
    bar, and ``stop_after`` steps (state saved) for time-limited jobs; the run's rerun resumes."""

    device: str | None = None
    progress: bool = True
    stop_after: int | None = None


def start(seed: int, device: str | None) -> tuple[World, str]:
    """Seed torch, join the launched world (torchrun/srun, or one process) and pick this rank's device,
    made the current CUDA device (what torch puts on "the current device" follows it)."""
    import torch

    torch.manual_seed(seed)
    world = distributed.launched()
    device = distributed.pick_device(device, world)
    if device.startswith("cuda"):
        torch.cuda.set_device(gpu_index(device))
    return world, device


def adamw(parameters, lr: float, weight_decay: float, device: str):
    """The optimizer of every training run: AdamW, one fused kernel for all parameters on CUDA."""
    import torch

    return torch.optim.AdamW(parameters, lr=lr, weight_decay=weight_decay, fused=device.startswith("cuda"))


def train_recipe(recipe, trainee: Trainee, output: Path, device: str, run: Invocation, world: World) -> dict:
    """``run_loop`` with a recipe's learning rate, precision, seed and save interval; the output folder is
    made on the main rank."""
    settings = LoopSettings(
        len(trainee.batches), recipe.lr, precision=recipe.precision, seed=recipe.seed, save_every=recipe.save_every
    )
    if trainee.batches:  # a global batch the ranks cannot share equally: one line, now
        world.share(trainee.batches[0], "--questions-per-step")
    if world.main:
        output.mkdir(parents=True, exist_ok=True)
    return run_loop(trainee, output, settings, device, run.progress, run.stop_after, world)


def _rng_state(device: str) -> dict:
    """The generators a step draws from: the CPU's and the training GPU's own (named, not the current one)."""
    import torch

    cuda = torch.cuda.get_rng_state(gpu_index(device)) if device.startswith("cuda") else None
    return {"rng": torch.get_rng_state(), "cuda_rng": cuda}


def _restore_rng(saved: dict, device: str) -> None:
    import torch

    torch.set_rng_state(saved["rng"])
    if device.startswith("cuda") and saved.get("cuda_rng") is not None:
        torch.cuda.set_rng_state(saved["cuda_rng"], gpu_index(device))


def _finished(output: Path, settings: LoopSettings, world: World) -> dict | None:
    """What a finished run recorded (then the rest of the run resumes without training), else None."""
    if not (output / RESULT).exists():
        return None
    with restoring(output / RESULT, f"delete {output / RESULT} to train again"):
        recorded = json.loads((output / RESULT).read_text(encoding="utf-8"))
        if not isinstance(recorded, dict) or recorded.get("steps") != settings.steps:
            raise ValueError("it records another run")
    log.info("%s: trained already (%s); finishing the run", output, RESULT)
    if world.main:
        shutil.rmtree(output / STATE, ignore_errors=True)  # a kill before the state went: nothing to resume now
    return recorded


def _log_of(losses) -> list:
    """The step log of a state saved before it had one (each step's loss alone, as ``losses``)."""
    return [{"step": n, "loss": loss} for n, loss in enumerate(losses, 1)] if isinstance(losses, list) else losses


class _Progress:
    """The run's record: each step's loss (the ranks' mean), a running average every 50 steps."""

    def __init__(self) -> None:
        self.step, self.history, self.running, self.log = 0, [], None, []

    def add(self, value: float, started: float, steps: int) -> dict:
        self.step += 1
        self.running = value if self.running is None else 0.98 * self.running + 0.02 * value
        if self.step % 50 == 0 or self.step == steps:
            self.history.append(
                {"step": self.step, "loss": round(self.running, 4), "seconds": round(time.time() - started, 1)}
            )
        entry = {"step": self.step, "loss": round(value, 6)}
        self.log.append(entry)
        return entry


def run_loop(
    trainee: Trainee,
    output: Path,
    settings: LoopSettings,
    device: str,
    progress: bool = True,
    stop_after: int | None = None,
    world: World = World(),
) -> dict:
    """Train ``trainee`` for the steps [saved step, steps); returns the training record."""
    import torch
    from tqdm import tqdm

    recorded = _finished(output, settings, world) if trainee.save_model is not None else None
    if recorded is not None:
        return recorded
    model = trainee.model.to(device).train()  # before the optimizer: its state follows the parameters
    optimizer = adamw(trainee.parameters, settings.lr, settings.weight_decay, device)
    warmup, steps = settings.warmup_length(), settings.steps
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda s: min((s + 1) / warmup, max(0.0, (steps - s) / max(1, steps - warmup)))
    )
    record, state_dir = _Progress(), settled(output / STATE)
    if (state_dir / TRAINER).exists():
        start_over = f"delete {state_dir} to train from the start"
        with restoring(state_dir, start_over):
            saved = load_weights(state_dir / TRAINER)
            model.load_state_dict(load_weights(state_dir / "model.pt"))
            optimizer.load_state_dict(saved["optimizer"])
            for group in optimizer.param_groups:  # the saved groups carry the device they ran on, not this one's
                group["fused"] = device.startswith("cuda")
            scheduler.load_state_dict(saved["scheduler"])
            record.step = check_step(saved["step"], settings.steps, state_dir, start_over)
            record.history, record.running = json.loads(saved["history"]), saved.get("running_loss")
            record.log = json.loads(saved["log"]) if "log" in saved else _log_of(json.loads(saved.get("losses", "[]")))
            if not isinstance(record.history, list) or not isinstance(record.log, list):
                raise TypeError("its history or log are not lists")
            trainee.restore(saved.get("extra") or {})
            _restore_rng(saved, device)  # dropout continues as in an uninterrupted run
        log.info("resuming %s at step %d of %d", output, record.step, settings.steps)
    precision = pick_precision(settings.precision, device, "train")
    autocast = precision == "bf16"
    if world.active:
        distributed.start(device)
    parallel = distributed.wrap(model, device, trainee.unused_parameters) if world.active else model
    forward = torch.compile(parallel) if settings.compile else parallel
    end = settings.steps if stop_after is None else min(settings.steps, record.step + stop_after)
    per_step = settings.accumulation

    def save() -> None:
        if not world.main:  # one writer
            return
        with atomic_dir(state_dir) as tmp:  # a kill never leaves no state: the last one is kept aside
            torch.save(model.state_dict(), tmp / "model.pt")
            torch.save(
                {
                    "optimizer": optimizer.state_dict(),
                    "scheduler": scheduler.state_dict(),
                    "step": record.step,
                    "history": json.dumps(record.history),
                    "running_loss": record.running,
                    "log": json.dumps(record.log),
                    "extra": trainee.state(),
                    **_rng_state(device),
                },
                tmp / TRAINER,
            )

    started, before_step, in_step = time.time(), None, False
    fed = feed(range(record.step * per_step, end * per_step), lambda g: trainee.prepare(trainee.batches[g]), device)
    bar = tqdm(
        total=settings.steps, initial=record.step, desc="train", unit="step", disable=not progress or not world.main
    )
    try:
        with (
            distributed.collective_errors(world),
            held_interrupts() as check_interrupts,
            out_of_memory_hint(*trainee.memory),
        ):
            while record.step < end:
                before_step, in_step = _rng_state(device), True  # a step cut short is rewound to here
                losses = []
                for micro in range(per_step):
                    inputs = next(fed)
                    inputs = to_device(inputs, device) if isinstance(inputs, dict) else inputs
                    accumulating = world.active and micro < per_step - 1
                    with (
                        torch.autocast(device.split(":")[0], dtype=torch.bfloat16, enabled=autocast),
                        parallel.no_sync() if accumulating else contextlib.nullcontext(),
                    ):
                        loss = trainee.loss_of(inputs, forward) / per_step
                    loss.backward()
                    losses.append(loss.detach())
                torch.nn.utils.clip_grad_norm_(trainee.parameters, settings.max_grad_norm)
                optimizer.step()
                scheduler.step()
                optimizer.zero_grad(set_to_none=True)
                total = torch.stack(losses).sum()  # one device sync per step, after the step is queued
                if world.active:  # the ranks' mean loss, and whether any rank holds Ctrl-C or SIGTERM
                    value, stop = distributed.mean_and_stop(total, check_interrupts.pending)
                else:
                    value, stop = float(total), False
                entry, in_step = record.add(value, started, settings.steps), False
                save_now = trainee.after_step(record.step, entry) if trainee.after_step else False
                bar.set_postfix(loss=f"{record.running:.3f}", **{k: v for k, v in entry.items() if k == "dev_em"})
                bar.update(1)
                periodic = settings.save_every and record.step % settings.save_every == 0
                if record.step < settings.steps and (periodic or save_now or record.step == end):
                    with distributed.one_writer(world):  # the others wait on the store, not a collective
                        save()
                if not world.active or stop:  # ranks stop after the step they agreed on, never one alone
                    check_interrupts(stop)  # Ctrl-C or SIGTERM during the step stop here, with the step whole
    except distributed.CollectiveFailure:  # a rank died: this one may be mid-step, so it saves nothing
        raise
    except (KeyboardInterrupt, IfqaError):  # interrupted, or out of memory within a step: keep the whole steps
        optimizer.zero_grad(set_to_none=True)
        if record.step > 0:
            if in_step:  # its dropout masks come again when it is taken on resuming
                _restore_rng(before_step, device)
            save()
            log.warning("%s: stopped at step %d of %d, state saved", output, record.step, settings.steps)
        raise
    finally:
        bar.close()
        forward = parallel = None  # DistributedDataParallel lets go of the process group before the group is left
        distributed.stop()
    return _finish(trainee, record, output, settings, device, precision, world)


def _finish(trainee, record: _Progress, output: Path, settings, device: str, precision: str, world: World) -> dict:
    """The record of this invocation; a finished run's model saved, its log and result written."""
    result = {
        "step": record.step,
        "steps": settings.steps,
        "history": record.history,
        "log": record.log,
        "finished": record.step >= settings.steps,
        "device": device,
        **trainee.state(),
    }
    if not result["finished"]:
        return result
    result.update(bf16=precision == "bf16", numerics=numerics(device, precision))
    if trainee.save_model is not None and world.main:
        trainee.save_model(output)  # replaces a model an earlier, killed run saved from the same final state
        with atomic_write(output / "train_log.jsonl") as handle:
            handle.write("".join(json.dumps(entry) + "\n" for entry in record.log))
        write_json(output / RESULT, result)  # the model is saved: from here a rerun does not train again
    if world.main:
        shutil.rmtree(output / STATE, ignore_errors=True)
    return result
