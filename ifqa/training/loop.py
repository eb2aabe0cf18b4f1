"""The training loop both learned retrievers share: seeded plan of steps, bf16 autocast on a GPU
that has it natively (fp32 on a CPU unless asked: the same losses on every CPU), warm-up then linear decay, resumable state saved atomically every N steps and
after the step a Ctrl-C or SIGTERM arrived in, progress with the running loss.

The step plan is a pure function of the seed, so a resumed run skips the steps already taken and
continues exactly as an uninterrupted one would.
"""

from __future__ import annotations

import json
import logging
import shutil
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from ifqa import distributed
from ifqa.devices import numerics, pick_precision
from ifqa.distributed import World
from ifqa.errors import check_step, restoring
from ifqa.interrupts import held_interrupts
from ifqa.io import atomic_dir, atomic_write, settled, write_json
from ifqa.models import load_weights

log = logging.getLogger(__name__)

STATE = "state"
#: What a finished run recorded, written once its model is saved: its presence means training is done,
#: so a run killed after it (while the card is written or dev is scored) finishes without training again.
RESULT = "train_result.json"


@dataclass
class LoopSettings:
    steps: int
    lr: float
    warmup: float = 0.1
    weight_decay: float = 0.01
    save_every: int = 200
    precision: str = "auto"  # devices.pick_precision's, for training: bf16 autocast or fp32
    seed: int = 0


def check_saved_state(output: Path) -> None:
    """What of a saved state can be checked before any work (mining takes minutes and writes its
    groups): its files load as weights and the trainer's holds every key at a whole step. The rest
    (the model's shapes, the step against the run's length) is checked when the state is restored."""
    state_dir = settled(Path(output) / STATE)
    if not (state_dir / "trainer.pt").exists() and not (state_dir / "model.pt").exists():
        return
    start_over = f"delete {state_dir} to train from the start"
    with restoring(state_dir, start_over):
        saved = load_weights(state_dir / "trainer.pt")
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
    """Seed torch, join the launched world (torchrun/srun, or one process) and pick this rank's device."""
    import torch

    torch.manual_seed(seed)
    world = distributed.launched()
    return world, distributed.pick_device(device, world)


def train_recipe(
    recipe, model, parameters, steps: Sequence, loss_of: Callable, output: Path, device: str, how: dict
) -> dict:
    """``run_loop`` with a recipe's learning rate, precision, seed and save interval; the output folder is
    made on the main rank. ``how``: ``run_loop``'s progress, stop_after, save_model, world, unused_parameters."""
    settings = LoopSettings(
        len(steps), recipe.lr, precision=recipe.precision, seed=recipe.seed, save_every=recipe.save_every
    )
    if how["world"].main:
        output.mkdir(parents=True, exist_ok=True)
    return run_loop(model, parameters, steps, loss_of, output, settings, device, **how)


def run_loop(
    model,
    parameters,
    batches: Sequence,
    loss_of: Callable,
    output: Path,
    settings: LoopSettings,
    device: str,
    progress: bool = True,
    stop_after: int | None = None,
    save_model: Callable[[Path], None] | None = None,
    world: World = World(),
    unused_parameters: bool = False,
) -> dict:
    """Train ``model`` on ``batches[i]`` for i in [state step, steps); returns the training log.

    ``loss_of(batch, forward)`` computes the loss calling ``forward`` (the model, or under several
    ranks the model in DistributedDataParallel) on this rank's share of the global batch;
    ``unused_parameters``: some of the model's parameters get no gradient (DDP must look for them)."""
    import torch
    from tqdm import tqdm

    optimizer = torch.optim.AdamW(parameters, lr=settings.lr, weight_decay=settings.weight_decay)
    warmup = max(1, int(settings.warmup * settings.steps))
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda s: min((s + 1) / warmup, max(0.0, (settings.steps - s) / max(1, settings.steps - warmup)))
    )
    state_dir = settled(output / STATE)
    if (output / RESULT).exists() and save_model is not None:  # trained already: the rest of the run resumes
        with restoring(output / RESULT, f"delete {output / RESULT} to train again"):
            recorded = json.loads((output / RESULT).read_text(encoding="utf-8"))
            if not isinstance(recorded, dict) or recorded.get("steps") != settings.steps:
                raise ValueError("it records another run")
        log.info("%s: trained already (%s); finishing the run", output, RESULT)
        if world.main:
            shutil.rmtree(state_dir, ignore_errors=True)  # a kill before the state went: nothing to resume now
        return recorded
    step, history, running = 0, [], None  # running: the loss average the progress bar and history show
    losses: list[float] = []  # every step's loss (the ranks' mean), for train_log.jsonl
    if (state_dir / "trainer.pt").exists():
        start_over = f"delete {state_dir} to train from the start"
        with restoring(state_dir, start_over):
            saved = load_weights(state_dir / "trainer.pt")
            model.load_state_dict(load_weights(state_dir / "model.pt"))
            optimizer.load_state_dict(saved["optimizer"])
            scheduler.load_state_dict(saved["scheduler"])
            step = check_step(saved["step"], settings.steps, state_dir, start_over)
            history, running = json.loads(saved["history"]), saved.get("running_loss")
            losses = json.loads(saved.get("losses", "[]"))
            if not isinstance(history, list) or not isinstance(losses, list):
                raise TypeError("its history or losses are not lists")
            torch.set_rng_state(saved["rng"])  # dropout continues as in an uninterrupted run
        log.info("resuming %s at step %d of %d", output, step, settings.steps)
    precision = pick_precision(settings.precision, device, "train")
    autocast = precision == "bf16"
    model.to(device).train()
    if world.active:
        distributed.start(device)
    forward = distributed.wrap(model, device, unused_parameters) if world.active else model
    end = settings.steps if stop_after is None else min(settings.steps, step + stop_after)

    def save() -> None:
        if not world.main:  # one writer
            return
        with atomic_dir(state_dir) as tmp:  # a kill never leaves no state: the last one is kept aside
            torch.save(model.state_dict(), tmp / "model.pt")
            torch.save(
                {
                    "optimizer": optimizer.state_dict(),
                    "scheduler": scheduler.state_dict(),
                    "step": step,
                    "history": json.dumps(history),
                    "running_loss": running,
                    "rng": torch.get_rng_state(),
                    "losses": json.dumps(losses),
                },
                tmp / "trainer.pt",
            )

    started = time.time()
    with (
        distributed.collective_errors(world),
        held_interrupts() as check_interrupts,
        tqdm(
            total=settings.steps, initial=step, desc="train", unit="step", disable=not progress or not world.main
        ) as bar,
    ):
        try:
            while step < end:
                with torch.autocast(device.split(":")[0], dtype=torch.bfloat16, enabled=autocast):
                    loss = loss_of(world.share(batches[step], "--questions-per-step"), forward)
                loss.backward()
                torch.nn.utils.clip_grad_norm_(parameters, 1.0)
                optimizer.step()
                scheduler.step()
                optimizer.zero_grad(set_to_none=True)
                step += 1
                if world.active:  # the ranks' mean loss, and whether any rank holds Ctrl-C or SIGTERM
                    value, stop = distributed.mean_and_stop(loss, check_interrupts.pending)
                else:
                    value, stop = float(loss.detach()), False
                running = value if running is None else 0.98 * running + 0.02 * value
                losses.append(round(value, 6))
                if step % 50 == 0 or step == settings.steps:
                    history.append(
                        {"step": step, "loss": round(running, 4), "seconds": round(time.time() - started, 1)}
                    )
                bar.set_postfix(loss=f"{running:.3f}")
                bar.update(1)
                if step % settings.save_every == 0 and step < settings.steps:
                    with distributed.one_writer(world):  # the others wait on the store, not a collective
                        save()
                if not world.active or stop:  # ranks stop after the step they agreed on, never one alone
                    check_interrupts(stop)  # Ctrl-C or SIGTERM during the step stop here, with the step whole
        except KeyboardInterrupt:  # no step is lost
            save()
            log.warning("%s: stopped at step %d of %d, state saved", output, step, settings.steps)
            raise
    forward = None  # DistributedDataParallel lets go of the process group before the group is left
    distributed.stop()
    if step < settings.steps:
        save()
        return {"step": step, "steps": settings.steps, "history": history, "finished": False, "device": device}
    result = {
        "step": step,
        "steps": settings.steps,
        "history": history,
        "finished": True,
        "device": device,
        "bf16": autocast,
        "numerics": numerics(device, precision),
    }
    if save_model is not None and world.main:
        save_model(output)  # replaces a model an earlier, killed run saved from the same final state

        with atomic_write(output / "train_log.jsonl") as handle:
            handle.write("".join(json.dumps({"step": n, "loss": loss}) + "\n" for n, loss in enumerate(losses, 1)))
        write_json(output / RESULT, result)  # the model is saved: from here a rerun does not train again
    if world.main:
        shutil.rmtree(state_dir, ignore_errors=True)
    return result
