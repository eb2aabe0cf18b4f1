"""FiD training (the model alone, eager and compiled, then `ifqa train fid`) and FiD reading."""

from __future__ import annotations

import json
import time
from pathlib import Path

from gpu.inputs import demo_passages
from gpu.suite import GOALS, Suite, release, row


def fid_training(suite: Suite) -> list[dict]:
    """The model alone (what `ifqa train fid` runs each step), eager and compiled, then the command's
    own loop. Where ``torch.compile`` cannot run here, the eager rate (what a user gets) with the reason."""
    from fid_throughput import measure

    from ifqa.devices import compile_unavailable

    size, device, folders = suite.size, suite.device, suite.folders
    # smoke sizes take the eager path (a cold CPU compile is a minute; tests/readers/test_fid.py compiles)
    reason = "smoke sizes on a CPU" if suite.smoke else compile_unavailable(device)
    rows = []
    for batch in size["fid_batches"]:
        eager = measure(False, batch, size["fid_steps"], 20, 250, device=device, folder=folders["t5"])
        shape = f"FiD training, {size['t5']}, 20 x 250 tokens, batch {batch}, the model alone"
        if reason:
            rows.append(row(f"{shape}, eager", eager["examples/s"], "ex/s", note=f"compile unavailable: {reason}"))
            continue
        compiled = measure(False, batch, size["fid_steps"], 20, 250, device=device, folder=folders["t5"], compiled=True)
        rows.append(
            row(
                f"{shape}, compiled (beside it: eager; peak GiB {compiled['peak GiB']:.1f} vs {eager['peak GiB']:.1f})",
                compiled["examples/s"],
                "ex/s",
                same=eager["examples/s"],
            )
        )
    rows.append(fid_command(suite))
    return rows


def fid_run(path: Path, passages: list[dict], n: int) -> None:
    path.write_text(
        "".join(
            json.dumps(
                {
                    "qid": str(i),
                    "question": f"If question {i} were asked, what would follow?",
                    "answers": [passages[i]["title"] or "unknown"],
                    "ctxs": passages[i : i + 20],
                }
            )
            + "\n"
            for i in range(n)
        )
    )


def fid_command(suite: Suite) -> dict:
    """`ifqa train fid` (batch 8 on a GPU; compiled, fused AdamW, data path included), from a fresh
    folder: the steady rate over the last two thirds of its steps, timed as the loop takes each
    batch (the loop reads the loss once a step, so it cannot run ahead of the GPU)."""
    import torch

    from ifqa import feeding
    from ifqa.devices import compile_unavailable
    from ifqa.training.fid import train
    from ifqa.training.recipes import FiDRecipe

    size, device = suite.size, suite.device
    folder = suite.work.new("fid-train")
    folder.mkdir()
    batch, steps = max(size["fid_batches"]), 3 * size["fid_steps"]
    run = folder / "run.jsonl"
    fid_run(run, demo_passages(), 400)
    stamps: list[float] = []
    feed = feeding.feed  # the training loop's feed: time each batch it takes

    def timed_feed(*args, **kwargs):
        for item in feed(*args, **kwargs):
            stamps.append(time.perf_counter())
            yield item

    torch._dynamo.reset()
    config = FiDRecipe(
        model=str(suite.folders["t5"]),
        steps=steps,
        batch_size=batch,
        warmup_steps=1,
        save_every=0,
        compile=device.startswith("cuda") and compile_unavailable(device) is None,
    )
    feeding.feed = timed_feed
    started = time.time()
    try:
        train(run, None, folder / "out", config, device, progress=False)
    finally:
        feeding.feed = feed
    first = steps // 3
    rate = batch * (len(stamps) - 1 - first) / max(1e-9, stamps[-1] - stamps[first])
    goal = GOALS["fid"]
    suite.goals.judge(
        "fid",
        rate,
        goal["rate"],
        f"{rate:,.1f} ex/s ({size['t5']}, batch {batch})",
        "" if batch == goal["batch"] and size["t5"] == "t5-base" else f"batch {batch}",
    )
    return row(
        f"`ifqa train fid`, {size['t5']}, 20 x 250 tokens, batch {batch} (steady rate over steps {first + 1}-{steps}; "
        "data path included)",
        rate,
        "ex/s",
        note=f"{time.time() - started:.0f} s for {steps} steps, compiling and saving included",
    )


def fid_reading(suite: Suite) -> dict:
    from transformers import AutoTokenizer

    from ifqa.readers.fid.data import FiDSettings
    from ifqa.readers.fid.model import load_model
    from ifqa.readers.fid.predict import predict

    folder = suite.work.new("fid-read")
    folder.mkdir()
    run = folder / "run.jsonl"
    fid_run(run, demo_passages(), suite.size["reads"])
    records = [json.loads(line) for line in run.read_text().splitlines()]
    t5 = suite.folders["t5"]
    model, tokenizer = load_model(t5, suite.device), AutoTokenizer.from_pretrained(str(t5))
    predict(model, tokenizer, records[:8], FiDSettings(), 8)  # warm-up
    started = time.perf_counter()
    predict(model, tokenizer, records, FiDSettings(), 8)
    rate = len(records) / (time.perf_counter() - started)
    del model
    release(suite.device)
    return row("FiD reading, 20 passages, greedy, batch 8 (random weights: all 20 answer tokens)", rate, "q/s")
