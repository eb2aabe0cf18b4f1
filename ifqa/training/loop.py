"""The training loop both learned retrievers share: seeded plan of steps, bf16 autocast where the
hardware has it, warm-up then linear decay, resumable state saved atomically every N steps and
after the step a Ctrl-C or SIGTERM arrived in, progress with the running loss.

The step plan is a pure function of the seed, so a resumed run skips the steps already taken and
continues exactly as an uninterrupted one would.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

from ifqa.devices import bf16_supported
from ifqa.interrupts import held_interrupts

log = logging.getLogger(__name__)

STATE = "state"


@dataclass
class LoopSettings:
    steps: int
    lr: float
    warmup: float = 0.1
    weight_decay: float = 0.01
    save_every: int = 200
    bf16: bool = True
    seed: int = 0


def run_loop(model, parameters, batches: Sequence, loss_of: Callable, output: Path, settings: LoopSettings,
             device: str, progress: bool = True, stop_after: int | None = None,
             save_model: Callable[[Path], None] | None = None) -> dict:
    """Train ``model`` on ``batches[i]`` for i in [state step, steps); returns the training log."""
    import torch
    from tqdm import tqdm

    optimizer = torch.optim.AdamW(parameters, lr=settings.lr, weight_decay=settings.weight_decay)
    warmup = max(1, int(settings.warmup * settings.steps))
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: min((s + 1) / warmup, max(0.0, (settings.steps - s) / max(1, settings.steps - warmup))))
    state_dir = output / STATE
    step, history, running = 0, [], None  # running: the loss average the progress bar and history show
    if (state_dir / "trainer.pt").exists():
        saved = torch.load(state_dir / "trainer.pt", map_location="cpu", weights_only=True)
        model.load_state_dict(torch.load(state_dir / "model.pt", map_location="cpu", weights_only=True))
        optimizer.load_state_dict(saved["optimizer"])
        scheduler.load_state_dict(saved["scheduler"])
        step, history, running = int(saved["step"]), json.loads(saved["history"]), saved.get("running_loss")
        torch.set_rng_state(saved["rng"])  # dropout continues as in an uninterrupted run
        log.info("resuming %s at step %d of %d", output, step, settings.steps)
    autocast = settings.bf16 and bf16_supported(device)
    model.to(device).train()
    end = settings.steps if stop_after is None else min(settings.steps, step + stop_after)

    def save() -> None:
        tmp = output / (STATE + ".tmp")
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        torch.save(model.state_dict(), tmp / "model.pt")
        torch.save({"optimizer": optimizer.state_dict(), "scheduler": scheduler.state_dict(), "step": step,
                    "history": json.dumps(history), "running_loss": running, "rng": torch.get_rng_state()},
                   tmp / "trainer.pt")
        shutil.rmtree(state_dir, ignore_errors=True)
        os.replace(tmp, state_dir)

    started = time.time()
    with tqdm(total=settings.steps, initial=step, desc="train", unit="step", disable=not progress) as bar, \
            held_interrupts() as check_interrupts:
        try:
            while step < end:
                with torch.autocast(device.split(":")[0], dtype=torch.bfloat16, enabled=autocast):
                    loss = loss_of(batches[step])
                loss.backward()
                torch.nn.utils.clip_grad_norm_(parameters, 1.0)
                optimizer.step()
                scheduler.step()
                optimizer.zero_grad(set_to_none=True)
                step += 1
                value = float(loss.detach())
                running = value if running is None else 0.98 * running + 0.02 * value
                if step % 50 == 0 or step == settings.steps:
                    history.append({"step": step, "loss": round(running, 4), "seconds": round(time.time() - started, 1)})
                bar.set_postfix(loss=f"{running:.3f}")
                bar.update(1)
                if step % settings.save_every == 0 and step < settings.steps:
                    save()
                check_interrupts()  # Ctrl-C or SIGTERM during the step stop here, with the step whole
        except KeyboardInterrupt:  # no step is lost
            save()
            log.warning("%s: stopped at step %d of %d, state saved", output, step, settings.steps)
            raise
    if step < settings.steps:
        save()
        return {"step": step, "steps": settings.steps, "history": history, "finished": False, "device": device}
    if save_model is not None:
        save_model(output)
    shutil.rmtree(state_dir, ignore_errors=True)
    return {"step": step, "steps": settings.steps, "history": history, "finished": True, "device": device,
            "bf16": autocast}
