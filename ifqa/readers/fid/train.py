"""FiD training: AdamW with warm-up and decay, accumulation, clipping, bf16 on GPU, dev EM with the
best checkpoint kept, and an exact resume from ``last/``."""

from __future__ import annotations

import contextlib
import json
import logging
import random
import shutil
from dataclasses import asdict
from pathlib import Path
from typing import Any, Sequence

import torch
from transformers import AutoTokenizer

from ifqa.devices import pick_device
from ifqa.eval.answers import best_over_answers, exact_match
from ifqa.errors import IfqaError
from ifqa.readers.fid import FiDTrainConfig
from ifqa.readers.fid.data import FID_CONFIG, Collator, FiDSettings
from ifqa.readers.fid.model import load_model
from ifqa.readers.fid.predict import predict

log = logging.getLogger(__name__)


def _save_model(model, tokenizer, settings: FiDSettings, target: Path, extra: dict | None = None) -> None:
    """Write a checkpoint folder aside and swap it in, so a crash never leaves half a checkpoint."""
    tmp = target.with_name(f".{target.name}.tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    model.save_pretrained(tmp)
    tokenizer.save_pretrained(tmp)
    (tmp / FID_CONFIG).write_text(json.dumps(asdict(settings), indent=2))
    if extra is not None:
        torch.save(extra, tmp / "trainer_state.pt")
    old = target.with_name(f".{target.name}.old")
    shutil.rmtree(old, ignore_errors=True)
    if target.exists():
        target.rename(old)
    tmp.rename(target)
    shutil.rmtree(old, ignore_errors=True)


def load_trainer_state(path: Path) -> dict:
    """The resumable state, loaded with ``weights_only=True``: tensors, numbers, strings and
    containers only, so a crafted file cannot run code (a plain pickle would)."""
    import pickle

    try:
        return torch.load(path, map_location="cpu", weights_only=True)
    except (pickle.UnpicklingError, RuntimeError, EOFError) as exc:
        message = str(exc).strip().splitlines()[0][:160] if str(exc).strip() else type(exc).__name__
        raise IfqaError(f"not a trainer state this version can load safely ({message})", path) from None


def _batch_order(n: int, batch_size: int, seed: int, step: int) -> list[int]:
    """The examples of optimizer micro-step ``step``: epochs are seeded permutations, so resuming at
    any step sees exactly the data an uninterrupted run would have seen."""
    per_epoch = max(1, n // batch_size)
    epoch, position = divmod(step, per_epoch)
    order = list(range(n))
    random.Random(seed * 100003 + epoch).shuffle(order)
    return order[position * batch_size : (position + 1) * batch_size]


def evaluate_em(model, tokenizer, records: Sequence[dict], settings: FiDSettings, batch_size: int) -> float:
    predictions = predict(model, tokenizer, records, settings, batch_size)
    return 100.0 * sum(best_over_answers(exact_match, p, r["answers"]) for p, r in zip(predictions, records)) / max(1, len(records))


def train(train_run: str | Path, dev_run: str | Path | None, output: str | Path, config: FiDTrainConfig,
          device: str | None = None, progress: bool = True, stop_after: int | None = None) -> dict:
    """Train FiD; resumes from ``output/last`` when it exists. Returns the training state.

    ``stop_after`` ends this invocation after that many steps (state saved), for time-limited jobs.
    """
    from tqdm import tqdm
    from transformers import get_linear_schedule_with_warmup

    from ifqa.artifacts import read_run

    output = Path(output)
    device = pick_device(device)
    settings = FiDSettings(config.n_context, config.text_maxlength, config.answer_maxlength)
    train_records = read_run(train_run)
    dev_records = read_run(dev_run) if dev_run else []
    if not train_records:
        raise IfqaError("no training questions", train_run)
    last = output / "last"
    resuming = (last / "trainer_state.pt").exists()
    if resuming:
        saved = json.loads((output / "train_config.json").read_text())
        if "bf16" in saved:  # written before the setting was named fp32
            saved["fp32"] = not saved.pop("bf16")
        if saved != asdict(config):
            raise IfqaError("this folder holds a run with other settings; use the same options or a new --output", output)
    else:
        output.mkdir(parents=True, exist_ok=True)
        (output / "train_config.json").write_text(json.dumps(asdict(config), indent=2))
    torch.manual_seed(config.seed)
    source = last if resuming else config.model
    model = load_model(source, device)
    tokenizer = AutoTokenizer.from_pretrained(str(source))
    if config.gradient_checkpointing:
        model.gradient_checkpointing_enable()
        model.config.use_cache = False
    optimizer = torch.optim.AdamW(model.parameters(), lr=config.lr, weight_decay=config.weight_decay)
    scheduler = get_linear_schedule_with_warmup(optimizer, config.warmup_steps, config.steps)
    state = {"step": 0, "best_em": -1.0, "log": []}
    if resuming:
        saved_state = load_trainer_state(last / "trainer_state.pt")
        optimizer.load_state_dict(saved_state["optimizer"])
        scheduler.load_state_dict(saved_state["scheduler"])
        torch.set_rng_state(saved_state["rng"])
        if device.startswith("cuda") and saved_state.get("cuda_rng") is not None:
            torch.cuda.set_rng_state(saved_state["cuda_rng"])
        state = saved_state["state"]
        log.info("resuming at step %d", state["step"])
    collator = Collator(tokenizer, settings)
    use_bf16 = not config.fp32 and device.startswith("cuda")
    bar = tqdm(total=config.steps, initial=state["step"], desc="train fid", disable=not progress)

    def checkpoint_state() -> dict:
        return {"optimizer": optimizer.state_dict(), "scheduler": scheduler.state_dict(), "rng": torch.get_rng_state(),
                "cuda_rng": torch.cuda.get_rng_state() if device.startswith("cuda") else None, "state": state}

    model.train()
    goal = min(config.steps, state["step"] + stop_after) if stop_after else config.steps
    while state["step"] < goal:
        step = state["step"]
        loss_total = 0.0
        for micro in range(config.accumulation):
            indices = _batch_order(len(train_records), config.batch_size, config.seed, step * config.accumulation + micro)
            batch = [train_records[i] for i in indices]
            choice = random.Random(f"{config.seed}:{step}:{micro}")
            inputs = collator.inputs(batch)
            labels = collator.labels([choice.choice(r["answers"]) for r in batch])
            with torch.autocast("cuda", dtype=torch.bfloat16) if use_bf16 else contextlib.nullcontext():
                loss = model(input_ids=inputs["input_ids"].to(device), attention_mask=inputs["attention_mask"].to(device),
                             labels=labels.to(device)).loss / config.accumulation
            loss.backward()
            loss_total += float(loss.detach())
        torch.nn.utils.clip_grad_norm_(model.parameters(), config.max_grad_norm)
        optimizer.step()
        scheduler.step()
        optimizer.zero_grad(set_to_none=True)
        state["step"] = step + 1
        entry: dict[str, Any] = {"step": state["step"], "loss": round(loss_total, 6)}
        done = state["step"] == config.steps
        if dev_records and (state["step"] % config.eval_every == 0 or done):
            entry["dev_em"] = evaluate_em(model, tokenizer, dev_records, settings, config.eval_batch_size)
            model.train()
            if entry["dev_em"] > state["best_em"]:
                state["best_em"] = entry["dev_em"]
                _save_model(model, tokenizer, settings, output / "best")
        state["log"].append(entry)
        bar.update(1)
        bar.set_postfix(loss=entry["loss"], em=entry.get("dev_em", state["best_em"]), refresh=False)
        if done or state["step"] == goal or (config.save_every and state["step"] % config.save_every == 0) or "dev_em" in entry:
            _save_model(model, tokenizer, settings, last, checkpoint_state())
    bar.close()
    if state["step"] < config.steps:
        log.info("stopped at step %d of %d; rerun the same command to continue", state["step"], config.steps)
        return state
    if not dev_records:
        _save_model(model, tokenizer, settings, output / "best")
    (output / "train_log.jsonl").write_text("".join(json.dumps(e) + "\n" for e in state["log"]))
    return state
