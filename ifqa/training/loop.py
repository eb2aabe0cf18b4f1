"""The one training loop of every model ifqa trains: seeded micro-batches with accumulation, bf16 autocast where
native (fp32 on a CPU unless asked: the same losses on every CPU), warm-up then linear decay, AdamW, optional
``torch.compile``, batches prepared ahead on CUDA, ranks under torchrun/srun. The plan is a pure function of the
seed, and the state (saved atomically every N steps and on Ctrl-C, SIGTERM or a GPU out of memory) holds the
generators, so a resumed run is an uninterrupted one. A model brings a ``Trainee``; ``_Run`` runs it in phases."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import random
import shutil
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ifqa import devices, distributed, feeding
from ifqa.devices import Device, gpu_index, numerics, pick_device, pick_precision
from ifqa.distributed import World
from ifqa.errors import IfqaError, check_step, restoring
from ifqa.interrupts import held_interrupts
from ifqa.io import atomic_dir, atomic_write, settled, write_json
from ifqa.models import load_weights

log = logging.getLogger(__name__)

STATE = "state"
#: What a finished run recorded, once its model is saved: a run killed after it finishes without training again.
RESULT = "train_result.json"
#: The trainer's half of a saved state (the model's is ``model.pt``).
TRAINER = "trainer.pt"
#: What a reader's training run records of its settings, beside its checkpoints (a resume must match it).
RUN_CONFIG = "train_config.json"


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

    @classmethod
    def of(cls, recipe, steps: int, **given) -> LoopSettings:
        """The settings a recipe declares (its fields of these names), ``given`` over them."""
        named = {f.name: getattr(recipe, f.name) for f in dataclasses.fields(cls) if hasattr(recipe, f.name)}
        return cls(**{**named, "steps": steps, **given})


class Evaluation:
    """What a trainee measures as it trains (a reader's dev EM; this one: nothing), carried across a resume.
    ``after_step`` may add to the step's log entry and says whether to save the state now."""

    def after_step(self, step: int, entry: dict) -> bool:
        return False

    def state(self) -> dict:
        return {}

    def restore(self, saved: dict) -> None:
        pass


@dataclass(kw_only=True)
class Trainee:
    """What a model brings to the loop. ``batches[g]`` plans micro-batch g, ``prepare`` makes it this rank's
    inputs (ahead, on CUDA); ``loss(inputs, forward)`` with ``forward`` the model as run (DDP, compiled);
    ``save(output)`` writes the finished model; ``memory``: what a GPU out of memory names (what a batch holds,
    what to lower)."""

    model: Any
    parameters: list
    batches: Sequence
    loss: Callable[[Any, Callable], Any]
    prepare: Callable[[Any], Any] = lambda plan: plan  # a plan that is already its inputs
    evaluation: Evaluation = Evaluation()
    save: Callable[[Path], None] | None = None
    unused_parameters: bool = False
    memory: tuple[str, str] = ("a training step", "the batch (the same command resumes)")


def batch_order(n: int, batch_size: int, seed: int, step: int) -> list[int]:
    """The examples of micro-batch ``step``: epochs are seeded permutations, so resuming at any step
    sees exactly the data an uninterrupted run would have seen."""
    per_epoch = max(1, n // batch_size)
    epoch, position = divmod(step, per_epoch)
    order = list(range(n))
    random.Random(seed * 100003 + epoch).shuffle(order)
    return order[position * batch_size : (position + 1) * batch_size]


def saved_state(output: Path, steps: int | None = None) -> tuple[dict, dict] | None:
    """The resumable state in ``output`` (the trainer's half, the model's weights), or None, checked whole (the
    mined kinds check it before minutes of mining); the model's shapes are checked when it is restored."""
    state_dir = settled(Path(output) / STATE)
    if not (state_dir / TRAINER).exists() and not (state_dir / "model.pt").exists():
        return None
    start_over = f"delete {state_dir} to train from the start"
    with restoring(state_dir, start_over):
        saved, weights = load_weights(state_dir / TRAINER), load_weights(state_dir / "model.pt")
        missing = {"optimizer", "scheduler", "step", "history", "rng"} - set(saved)
        if missing:
            raise KeyError(", ".join(sorted(missing)))
        whole = saved["step"] if steps is None and isinstance(saved["step"], int) else steps or 0
        saved["step"] = check_step(saved["step"], whole, state_dir, start_over)
    return saved, weights


@dataclass(frozen=True)
class Invocation:
    """How one invocation runs: its device (None: a GPU when present), a progress bar, and ``stop_after`` steps
    for time-limited jobs (the state saved; a rerun resumes)."""

    device: str | None = None
    progress: bool = True
    stop_after: int | None = None


def start(seed: int, device: str | None) -> tuple[World, Device]:
    """Seed torch, join the launched world and pick this rank's device, made the current CUDA device."""
    import torch

    torch.manual_seed(seed)
    world = distributed.launched()
    device = pick_device(device, world)
    if device.is_cuda:
        torch.cuda.set_device(gpu_index(device))
    return world, device


def compiles(recipe, device: Device) -> bool:
    """Whether the loop compiles a recipe's model: ``--compile`` where it can run (else one line, before any
    work), by default on CUDA when it can, never under ``--no-compile`` or for a recipe without the options."""
    if not hasattr(recipe, "no_compile"):
        return False
    if recipe.compile and recipe.no_compile:
        raise IfqaError("--compile and --no-compile contradict each other; give one")
    if recipe.no_compile or not (recipe.compile or device.is_cuda):
        return False
    reason = devices.compile_unavailable(device)  # looked up at call time: a test stands in for it
    if reason and recipe.compile:
        raise IfqaError(f"--compile: {reason} (leave it out to train eagerly)")
    if reason:
        log.info("training eagerly: torch.compile cannot run here (%s)", reason)
    return reason is None


def _rng_state(device: Device) -> dict:
    """The generators a step draws from: the CPU's and the training GPU's own (named, not the current one)."""
    import torch

    cuda = torch.cuda.get_rng_state(gpu_index(device)) if device.is_cuda else None
    return {"rng": torch.get_rng_state(), "cuda_rng": cuda}


def _restore_rng(saved: dict, device: Device) -> None:
    import torch

    torch.set_rng_state(saved["rng"])
    if device.is_cuda and saved.get("cuda_rng") is not None:
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


class _Run:
    """One invocation of the loop, in phases: restore, wrap, step, save, stop, finish."""

    def __init__(self, trainee: Trainee, output: Path, settings: LoopSettings, device: Device, world: World):
        import torch

        self.trainee, self.output, self.settings, self.device, self.world = trainee, output, settings, device, world
        self.model = trainee.model.to(device).train()  # before the optimizer: its state follows the parameters
        self.optimizer = torch.optim.AdamW(
            trainee.parameters, lr=settings.lr, weight_decay=settings.weight_decay, fused=device.is_cuda
        )
        steps, given = settings.steps, settings.warmup_steps
        warmup = max(1, given if given is not None else int(settings.warmup * steps))
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(
            self.optimizer, lambda s: min((s + 1) / warmup, max(0.0, (steps - s) / max(1, steps - warmup)))
        )
        self.record, self.state_dir = _Progress(), settled(output / STATE)
        self.before_step, self.in_step, self.started = None, False, time.time()

    def restore(self) -> None:
        """The saved state, when there is one: weights, optimizer, schedule, record, generators."""
        found = saved_state(self.output, self.settings.steps)
        if found is None:
            return
        (saved, weights), record = found, self.record
        with restoring(self.state_dir, f"delete {self.state_dir} to train from the start"):
            self.model.load_state_dict(weights)
            self.optimizer.load_state_dict(saved["optimizer"])
            for group in self.optimizer.param_groups:  # the saved groups carry the device they ran on, not this one's
                group["fused"] = self.device.is_cuda
            self.scheduler.load_state_dict(saved["scheduler"])
            record.step, record.running = saved["step"], saved.get("running_loss")
            record.history = json.loads(saved["history"])
            record.log = json.loads(saved["log"] if "log" in saved else saved.get("losses", "[]"))
            if "log" not in saved and isinstance(record.log, list):  # a state from before the log: losses alone
                record.log = [{"step": n, "loss": loss} for n, loss in enumerate(record.log, 1)]
            if not isinstance(record.history, list) or not isinstance(record.log, list):
                raise TypeError("its history or log are not lists")
            self.trainee.evaluation.restore(saved.get("extra") or {})
            _restore_rng(saved, self.device)  # dropout continues as in an uninterrupted run
        log.info("resuming %s at step %d of %d", self.output, record.step, self.settings.steps)

    def wrap(self):
        """(the model for the ranks: DDP under a launcher, the forward to call: compiled when asked)."""
        import torch

        parallel = self.model
        if self.world.active:
            distributed.start(self.device)
            parallel = distributed.wrap(self.model, self.device, self.trainee.unused_parameters)
        return parallel, torch.compile(parallel) if self.settings.compile else parallel

    def save(self) -> None:
        """The resumable state, on the main rank; a kill never leaves no state (the last one is kept aside)."""
        import torch

        if not self.world.main:
            return
        with atomic_dir(self.state_dir) as tmp:
            torch.save(self.model.state_dict(), tmp / "model.pt")
            trainer = {
                "optimizer": self.optimizer.state_dict(),
                "scheduler": self.scheduler.state_dict(),
                "step": self.record.step,
                "history": json.dumps(self.record.history),
                "running_loss": self.record.running,
                "log": json.dumps(self.record.log),
                "extra": self.trainee.evaluation.state(),
            }
            torch.save({**trainer, **_rng_state(self.device)}, tmp / TRAINER)

    def step(self, fed, parallel, forward, bf16: bool, check_interrupts) -> tuple[dict, bool, bool]:
        """One optimizer step over its micro-batches: (the step's log entry, whether to save the state now,
        whether a rank holds Ctrl-C or SIGTERM)."""
        import torch

        per_step = self.settings.accumulation
        self.before_step, self.in_step = _rng_state(self.device), True  # a step cut short is rewound to here
        losses = []
        for micro in range(per_step):
            inputs = next(fed)
            inputs = feeding.to_device(inputs, self.device) if isinstance(inputs, dict) else inputs
            accumulating = self.world.active and micro < per_step - 1
            with (
                torch.autocast(self.device.autocast_type, dtype=torch.bfloat16, enabled=bf16),
                parallel.no_sync() if accumulating else contextlib.nullcontext(),
            ):
                loss = self.trainee.loss(inputs, forward) / per_step
            loss.backward()
            losses.append(loss.detach())
        torch.nn.utils.clip_grad_norm_(self.trainee.parameters, self.settings.max_grad_norm)
        self.optimizer.step()
        self.scheduler.step()
        self.optimizer.zero_grad(set_to_none=True)
        total = torch.stack(losses).sum()  # one device sync per step, after the step is queued
        if self.world.active:  # the ranks' mean loss, and whether any rank holds Ctrl-C or SIGTERM
            value, stop = distributed.mean_and_stop(total, check_interrupts.pending)
        else:
            value, stop = float(total), False
        entry, self.in_step = self.record.add(value, self.started, self.settings.steps), False
        return entry, self.trainee.evaluation.after_step(self.record.step, entry), stop

    def saved_on_stop(self) -> None:
        """Interrupted or out of memory: the whole steps kept (the step cut short comes again, same dropout)."""
        self.optimizer.zero_grad(set_to_none=True)
        if self.record.step > 0:
            if self.in_step:
                _restore_rng(self.before_step, self.device)
            self.save()
            log.warning("%s: stopped at step %d of %d, state saved", self.output, self.record.step, self.settings.steps)

    def train(self, bf16: bool, progress: bool, stop_after: int | None) -> None:
        """The steps of this invocation, the state saved when due and when stopped."""
        from tqdm import tqdm

        parallel, forward = self.wrap()  # held here alone: let go before the process group is left (finally)
        settings, record, world, trainee = self.settings, self.record, self.world, self.trainee
        end = settings.steps if stop_after is None else min(settings.steps, record.step + stop_after)
        per_step, self.started = settings.accumulation, time.time()
        work = range(record.step * per_step, end * per_step)
        fed = feeding.feed(work, lambda g: trainee.prepare(trainee.batches[g]), self.device)
        bar = tqdm(
            total=settings.steps, initial=record.step, desc="train", unit="step", disable=not progress or not world.main
        )
        try:
            with (
                distributed.collective_errors(world),
                held_interrupts() as check_interrupts,
                feeding.out_of_memory_hint(*trainee.memory),
            ):
                while record.step < end:
                    entry, save_now, stop = self.step(fed, parallel, forward, bf16, check_interrupts)
                    bar.set_postfix(loss=f"{record.running:.3f}", **{k: v for k, v in entry.items() if k == "dev_em"})
                    bar.update(1)
                    periodic = settings.save_every and record.step % settings.save_every == 0
                    if record.step < settings.steps and (periodic or save_now or record.step == end):
                        with distributed.one_writer(world):  # the others wait on the store, not a collective
                            self.save()
                    if not world.active or stop:  # ranks stop after the step they agreed on, never one alone
                        check_interrupts(stop)
        except distributed.CollectiveFailure:  # a rank died: this one may be mid-step, so it saves nothing
            raise
        except (KeyboardInterrupt, IfqaError):  # interrupted, or out of memory within a step: keep the whole steps
            self.saved_on_stop()
            raise
        finally:
            bar.close()
            parallel = forward = None  # DistributedDataParallel lets go of the process group before the group is left
            distributed.stop()

    def finish(self, precision: str) -> dict:
        """The record of this invocation; a finished run's model saved, its log and result written."""
        record, output, world = self.record, self.output, self.world
        result = {
            "step": record.step,
            "steps": self.settings.steps,
            "history": record.history,
            "log": record.log,
            "finished": record.step >= self.settings.steps,
            "device": str(self.device),
            **self.trainee.evaluation.state(),
        }
        if not result["finished"]:
            return result
        result.update(bf16=precision == "bf16", numerics=numerics(self.device, precision))
        if self.trainee.save is not None and world.main:
            self.trainee.save(output)  # replaces a model an earlier, killed run saved from the same final state
            with atomic_write(output / "train_log.jsonl") as handle:
                handle.write("".join(json.dumps(entry) + "\n" for entry in record.log))
            write_json(output / RESULT, result)  # the model is saved: from here a rerun does not train again
        if world.main:
            shutil.rmtree(output / STATE, ignore_errors=True)
        return result


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
    device = Device.of(device)
    recorded = _finished(output, settings, world) if trainee.save is not None else None
    if recorded is not None:
        return recorded
    run = _Run(trainee, output, settings, device, world)
    run.restore()
    precision = pick_precision(settings.precision, device, "train")
    run.train(precision == "bf16", progress, stop_after)
    return run.finish(precision)
