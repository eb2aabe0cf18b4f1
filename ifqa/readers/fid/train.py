"""FiD training: AdamW with warm-up and decay, accumulation, clipping, bf16 on GPU, dev EM with the
best checkpoint kept, and an exact resume from ``last/``."""

from __future__ import annotations

import contextlib
import json
import logging
import random
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

import torch
from transformers import AutoTokenizer

from ifqa import distributed
from ifqa.artifacts import read_run
from ifqa.distributed import World
from ifqa.errors import IfqaError, check_step, restoring
from ifqa.eval.answers import best_over_answers, exact_match
from ifqa.interrupts import held_interrupts
from ifqa.io import atomic_dir, settled
from ifqa.models import load_weights
from ifqa.readers.fid import FiDTrainConfig
from ifqa.readers.fid.data import FID_CONFIG, Collator, FiDSettings
from ifqa.readers.fid.model import enable_checkpointing, load_model
from ifqa.readers.fid.predict import predict

log = logging.getLogger(__name__)


def _save_model(model, tokenizer, settings: FiDSettings, target: Path, extra: dict | None = None) -> None:
    """Write a checkpoint folder aside and swap it in (``io.atomic_dir``): a kill never leaves half a
    checkpoint, nor none (the one it replaces is kept aside until the new one is in place)."""
    with atomic_dir(target) as tmp:
        model.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        (tmp / FID_CONFIG).write_text(json.dumps(asdict(settings), indent=2))
        if extra is not None:
            torch.save(extra, tmp / "trainer_state.pt")


def _batch_order(n: int, batch_size: int, seed: int, step: int) -> list[int]:
    """The examples of optimizer micro-step ``step``: epochs are seeded permutations, so resuming at
    any step sees exactly the data an uninterrupted run would have seen."""
    per_epoch = max(1, n // batch_size)
    epoch, position = divmod(step, per_epoch)
    order = list(range(n))
    random.Random(seed * 100003 + epoch).shuffle(order)
    return order[position * batch_size : (position + 1) * batch_size]


def evaluate_em(
    model,
    tokenizer,
    records: Sequence[dict],
    settings: FiDSettings,
    batch_size: int,
    bf16: bool = True,
    world: World = World(),
) -> float:
    """Dev EM; under several ranks each predicts its share of whole batches and all gather the answers."""
    share = world.blocks(len(records), batch_size)
    predictions = distributed.gather_objects(
        predict(model, tokenizer, records[share.start : share.stop], settings, batch_size, bf16=bf16), world
    )
    return (
        100.0
        * sum(best_over_answers(exact_match, p, r["answers"]) for p, r in zip(predictions, records))
        / max(1, len(records))
    )


def _use_compile(config: FiDTrainConfig, device: str) -> bool:
    """``--compile`` where it can run (else one line, before any work); by default on CUDA when it can."""
    from ifqa.devices import compile_unavailable

    if config.compile and config.no_compile:
        raise IfqaError("--compile and --no-compile contradict each other; give one")
    if config.no_compile or not (config.compile or device.startswith("cuda")):
        return False
    reason = compile_unavailable(device)
    if reason and config.compile:
        raise IfqaError(f"--compile: {reason} (leave it out to train eagerly)")
    if reason:
        log.info("training eagerly: torch.compile cannot run here (%s)", reason)
    return reason is None


def _rng_state(device: str) -> dict:
    """The generators a step draws from: the CPU's and the training GPU's own (named, not the current one)."""
    cuda = torch.cuda.get_rng_state(device) if device.startswith("cuda") else None
    return {"rng": torch.get_rng_state(), "cuda_rng": cuda}


def _restore_rng(saved: dict, device: str) -> None:
    torch.set_rng_state(saved["rng"])
    if device.startswith("cuda") and saved.get("cuda_rng") is not None:
        torch.cuda.set_rng_state(saved["cuda_rng"], device)


class _Batches:
    """The tensors of micro-step ``g`` (inputs, labels), a pure function of the seed: worker processes
    prepare them ahead of the GPU (``batching.feed``) and a resumed run sees the same data. With a
    compiled model labels are padded to ``answer_maxlength`` (loss unchanged: padded positions are
    ignored and the decoder is causal), so every step has one shape and nothing recompiles."""

    def __init__(
        self,
        records: Sequence[dict],
        collator: Collator,
        config: FiDTrainConfig,
        fixed_shape: bool,
        world: World = World(),
    ):
        self.records, self.collator, self.config, self.fixed_shape = records, collator, config, fixed_shape
        self.world = world

    def __call__(self, g: int) -> dict:
        config = self.config
        step, micro = divmod(g, config.accumulation)
        batch = [self.records[i] for i in _batch_order(len(self.records), config.batch_size, config.seed, g)]
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
    """Train FiD; resumes from ``output/last`` when it exists. Returns the training state.

    ``stop_after`` ends this invocation after that many steps (state saved), for time-limited jobs.
    Ctrl-C, SIGTERM and a GPU out of memory stop it after the last whole step, state saved.
    """
    from tqdm import tqdm
    from transformers import get_linear_schedule_with_warmup

    from ifqa.retrieval.batching import feed, out_of_memory_hint, to_device

    output = Path(output)
    world = distributed.launched()
    device = distributed.pick_device(device, world)
    config = config.on(device, world.size)
    world.share(range(config.batch_size))  # a global batch the ranks cannot share equally: one line, now
    compiled = _use_compile(config, device)
    settings = FiDSettings(config.n_context, config.text_maxlength, config.answer_maxlength)
    train_records = read_run(train_run)
    dev_records = read_run(dev_run) if dev_run else []
    if not train_records:
        raise IfqaError("no training questions", train_run)
    last, _ = settled(output / "last"), settled(output / "best")  # a checkpoint swap a kill cut short
    resuming = (last / "trainer_state.pt").exists()
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
    if device.startswith("cuda"):  # what torch puts on "the current device" (pinning, caches) follows this one
        torch.cuda.set_device(device)
    if world.active:  # the group forms before anything is written: a peer that never comes leaves nothing
        distributed.start(device)
    torch.manual_seed(config.seed)
    source = last if resuming else config.model
    model = load_model(source, device)
    tokenizer = AutoTokenizer.from_pretrained(str(source))
    from ifqa.devices import bf16_supported, numerics

    use_bf16 = not config.fp32 and device.startswith("cuda") and bf16_supported(device)  # native only: V100/T4 fp32
    launch = {  # how this run was trained: the world, its batches and what decided the last digits
        "world_size": world.size,
        "global_batch": config.batch_size,
        "batch_per_rank": config.batch_size // world.size,
        "numerics": numerics(device, "bf16" if use_bf16 else "fp32"),
    }
    if not resuming and world.main:  # written once the model loads, so a model that cannot leaves nothing behind
        output.mkdir(parents=True, exist_ok=True)
        (output / "train_config.json").write_text(json.dumps({**asdict(config), "launch": launch}, indent=2))
    if config.gradient_checkpointing:  # in a form that compiles to one graph
        enable_checkpointing(model)
    optimizer = torch.optim.AdamW(
        model.parameters(), lr=config.lr, weight_decay=config.weight_decay, fused=device.startswith("cuda")
    )  # one kernel for all parameters
    scheduler = get_linear_schedule_with_warmup(optimizer, config.warmup_steps, config.steps)
    state = {"step": 0, "best_em": -1.0, "log": []}
    if resuming:
        start_over = f"delete {last} to train from the start, or use a new --output"
        with restoring(last / "trainer_state.pt", start_over):
            saved_state = load_weights(last / "trainer_state.pt")
            optimizer.load_state_dict(saved_state["optimizer"])
            for group in optimizer.param_groups:  # the saved groups carry the device they ran on, not this one's
                group["fused"] = device.startswith("cuda")
            scheduler.load_state_dict(saved_state["scheduler"])
            _restore_rng(saved_state, device)
            state = saved_state["state"]
            check_step(state["step"], config.steps, last / "trainer_state.pt", start_over)
            if not isinstance(state["log"], list) or not isinstance(state["best_em"], (int, float)):
                raise TypeError("its 'log' or 'best_em' is of the wrong type")
        log.info("resuming at step %d", state["step"])
    parallel = distributed.wrap(model, device) if world.active else model
    forward = torch.compile(parallel) if compiled else parallel  # generation and saving use the model itself
    bar = tqdm(total=config.steps, initial=state["step"], desc="train fid", disable=not progress or not world.main)

    def checkpoint_state() -> dict:
        return {
            "optimizer": optimizer.state_dict(),
            "scheduler": scheduler.state_dict(),
            **_rng_state(device),
            "state": state,
        }

    model.train()
    goal = min(config.steps, state["step"] + stop_after) if stop_after else config.steps
    micro_steps = range(state["step"] * config.accumulation, goal * config.accumulation)
    batches = feed(micro_steps, _Batches(train_records, Collator(tokenizer, settings), config, compiled, world), device)
    hint = out_of_memory_hint(
        f"a batch of {config.batch_size} questions x {config.n_context} passages",
        "memory: the same command with --gradient-checkpointing resumes from the last whole step "
        "(saved), or train into a new --output with a smaller --batch-size and --accumulation",
    )
    step, rng = state["step"], None
    try:
        with distributed.collective_errors(world), held_interrupts() as check_interrupts, hint:
            while state["step"] < goal:
                step = state["step"]
                rng = _rng_state(device)  # what a step cut short restores: its dropout masks come again
                losses = []
                for micro in range(config.accumulation):
                    batch = to_device(next(batches), device)
                    tokens = batch.pop("global_tokens", None)
                    last_micro = micro == config.accumulation - 1
                    with (
                        torch.autocast("cuda", dtype=torch.bfloat16) if use_bf16 else contextlib.nullcontext(),
                        parallel.no_sync() if world.active and not last_micro else contextlib.nullcontext(),
                    ):
                        loss = forward(**batch).loss
                        if tokens is not None:  # this rank's share of the global batch's mean over answer tokens
                            loss = loss * (batch["labels"] != -100).sum() * world.size / tokens
                        loss = loss / config.accumulation
                        loss.backward()
                    losses.append(loss.detach())
                torch.nn.utils.clip_grad_norm_(model.parameters(), config.max_grad_norm)
                optimizer.step()
                scheduler.step()
                optimizer.zero_grad(set_to_none=True)
                if world.active:  # the ranks' mean loss, and whether any rank holds Ctrl-C or SIGTERM
                    loss_total, stop = distributed.mean_and_stop(torch.stack(losses).sum(), check_interrupts.pending)
                else:
                    loss_total, stop = (
                        float(torch.stack(losses).sum()),
                        False,
                    )  # one device sync per step, after the step is queued
                state["step"] = step + 1
                entry: dict[str, Any] = {"step": state["step"], "loss": round(loss_total, 6)}
                done = state["step"] == config.steps
                if dev_records and (state["step"] % config.eval_every == 0 or done):
                    entry["dev_em"] = evaluate_em(
                        model, tokenizer, dev_records, settings, config.eval_batch_size, use_bf16, world
                    )
                    model.train()
                    if entry["dev_em"] > state["best_em"]:
                        state["best_em"] = entry["dev_em"]
                        with distributed.one_writer(world) as writes:  # the others wait on the store
                            if writes:
                                _save_model(model, tokenizer, settings, output / "best")
                state["log"].append(entry)
                bar.update(1)
                bar.set_postfix(loss=entry["loss"], em=entry.get("dev_em", state["best_em"]), refresh=False)
                if (
                    done
                    or state["step"] == goal
                    or "dev_em" in entry
                    or (config.save_every and state["step"] % config.save_every == 0)
                ):  # the same on every rank: a save no rank times out on, however long it takes
                    with distributed.one_writer(world) as writes:
                        if writes:
                            _save_model(model, tokenizer, settings, last, checkpoint_state())
                if not world.active or stop:  # ranks stop after the step they agreed on, never one alone
                    check_interrupts(stop)  # Ctrl-C or SIGTERM during the step stop here, with the step whole
    except distributed.CollectiveFailure:  # a rank died: this one may be mid-step, so it saves nothing
        raise
    except (KeyboardInterrupt, IfqaError):  # interrupted, or out of memory within a step: keep the whole steps
        optimizer.zero_grad(set_to_none=True)
        if state["step"] > 0 and world.main:
            if rng is not None and state["step"] == step:  # cut inside a step
                _restore_rng(rng, device)
            _save_model(model, tokenizer, settings, last, checkpoint_state())
            log.warning("%s: stopped at step %d of %d, state saved", output, state["step"], config.steps)
        raise
    finally:
        bar.close()
        forward = parallel = None  # DistributedDataParallel lets go of the process group before the group is left
        distributed.stop()
    if state["step"] < config.steps:
        log.info("stopped at step %d of %d; rerun the same command to continue", state["step"], config.steps)
        return state
    if not world.main:
        return state
    if not dev_records:
        _save_model(model, tokenizer, settings, output / "best")
    (output / "train_log.jsonl").write_text("".join(json.dumps(e) + "\n" for e in state["log"]))
    return state
