"""Training speed of `ifqa train llm` beside transformers' own `Trainer`, in one run: the same model
(SmolLM2-135M-Instruct, the GGUF file `demo:smollm2` dequantized), the same examples (the reader's
prompts over a run file, built by ifqa), batch, precision and optimizer (AdamW). Each side runs in a
process of its own, so its peak memory is its own; the `Trainer` side computes the loss the usual way
(labels over the whole row, the LM head over every position), ifqa's over the answer tokens alone.

    python benchmarks/llm_training.py [--run RUN] [--steps 6] [--batch-size 4] [--precision bf16]

RUN: a run file of training questions (default: benchmarks/.work/train-bm25-k5.jsonl, made by
`ifqa retrieve --index INDEX --setting supervised --split train --k 5`); without one, the demo set's
training questions retrieved from `demo:bm25`. Prints a Markdown table: tokens/s (prompt and answer
tokens, padding not counted), seconds per step, peak resident memory, and one epoch's wall time at
that rate over the run's questions.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import WORK, Parser, machine, markdown_table  # noqa: E402

DEFAULT_RUN = WORK / "train-bm25-k5.jsonl"


def examples(run: str, passages: int):
    """The model and the tokenized examples, as ``ifqa train llm`` builds them."""
    from ifqa.artifacts import read_run
    from ifqa.llm.session import ModelSession
    from ifqa.readers.llm.reader import LLMReader
    from ifqa.training import llm
    from ifqa.training.recipes import LLMRecipe

    recipe = LLMRecipe(passages=passages)
    config = llm.reader_config(recipe)
    session = ModelSession.open(config)
    session.backend.model.hf_quantizer = None  # dequantized GGUF weights: plain ones, as ifqa train llm takes them
    session.backend.model.is_quantized = False
    reader = LLMReader(session, config, [], set())
    return session.backend, llm.tokenized_examples(reader, read_run(run), 0)


def side(name: str, run: str, steps: int, batch: int, precision: str, passages: int) -> dict:
    """One side's measurement (run in its own process): tokens/s over ``steps`` steps after one warm-up step."""
    import torch

    torch.manual_seed(0)
    backend, built = examples(run, passages)
    every = len(built)
    chosen = built[: (steps + 1) * batch]
    tokens = sum(len(p) + len(a) for p, a in chosen[batch:])  # the warm-up step's batch is not timed
    model, tokenizer = backend.model.train(), backend.tokenizer
    if name == "ifqa":
        from ifqa.distributed import World
        from ifqa.training import llm
        from ifqa.training.loop import Evaluation, LoopSettings, Trainee, run_loop
        from ifqa.training.recipes import LLMRecipe

        recipe = LLMRecipe(batch_size=batch, seed=0)
        batches = llm._Batches(chosen, recipe, tokenizer.pad_token_id, World())
        settings = LoopSettings(steps + 1, 1e-5, precision=precision, save_every=None, warmup_steps=1)
        marks = []

        class Marks(Evaluation):
            def after_step(self, step: int, entry: dict) -> bool:
                marks.append(time.perf_counter())
                return False

        order = [[*range(g * batch, (g + 1) * batch)] for g in range(steps + 1)]  # the same order as the Trainer's
        trainee = Trainee(
            model=model,
            parameters=[p for p in model.parameters() if p.requires_grad],
            batches=range(steps + 1),
            loss=llm.answer_loss,
            prepare=lambda g: batches.collate([chosen[i] for i in order[g]]),
            evaluation=Marks(),
        )
        with tempfile.TemporaryDirectory() as folder:
            run_loop(trainee, Path(folder), settings, "cpu", progress=False)
        seconds = marks[-1] - marks[0]
    else:
        from transformers import DataCollatorForSeq2Seq, Trainer, TrainerCallback, TrainingArguments

        rows = [
            {"input_ids": p + a, "attention_mask": [1] * (len(p) + len(a)), "labels": [-100] * len(p) + a}
            for p, a in chosen
        ]
        marks = []

        class Marks(TrainerCallback):
            def on_step_end(self, args, state, control, **kwargs):
                marks.append(time.perf_counter())

        with tempfile.TemporaryDirectory() as folder:
            arguments = TrainingArguments(
                folder,
                per_device_train_batch_size=batch,
                max_steps=steps + 1,
                learning_rate=1e-5,
                bf16=precision == "bf16",
                use_cpu=True,
                save_strategy="no",
                report_to=[],
                logging_strategy="no",
                disable_tqdm=True,
                dataloader_num_workers=0,
                seed=0,
            )
            collator = DataCollatorForSeq2Seq(tokenizer, padding=True, label_pad_token_id=-100)
            trainer = Trainer(
                model=model, args=arguments, train_dataset=rows, data_collator=collator, callbacks=[Marks()]
            )
            trainer._get_train_sampler = lambda *args, **kwargs: None  # in order, as ifqa's side reads them
            trainer.train()
        seconds = marks[-1] - marks[0]
    epoch_tokens = sum(len(p) + len(a) for p, a in built)
    return {
        "side": name,
        "tokens/s": tokens / seconds,
        "s/step": seconds / steps,
        "peak RSS MB": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "epoch h": epoch_tokens / (tokens / seconds) / 3600,
        "questions": every,
    }


def main() -> None:
    parser = Parser(description=__doc__)
    parser.add_argument(
        "--run", input_file=True, help=f"training run (default: {DEFAULT_RUN.name}, else the demo set's)"
    )
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--batch-size", type=int, default=4)
    parser.add_argument("--passages", type=int, default=2)
    parser.add_argument("--precision", choices=("fp32", "bf16"), default="bf16")
    parser.add_argument("--side", choices=("ifqa", "trainer"), help=argparse_hidden())
    args = parser.parse_args()
    if args.side:
        settings = (str(args.run), args.steps, args.batch_size, args.precision, args.passages)
        print(json.dumps(side(args.side, *settings)))
        return
    run = str(args.run or (DEFAULT_RUN if DEFAULT_RUN.exists() else demo_run()))
    rows = []
    for name in ("ifqa", "trainer"):
        command = [sys.executable, __file__, "--side", name, "--run", run, "--steps", str(args.steps)]
        command += [
            "--batch-size",
            str(args.batch_size),
            "--precision",
            args.precision,
            "--passages",
            str(args.passages),
        ]
        done = subprocess.run(command, capture_output=True, text=True, env={**os.environ, "TQDM_DISABLE": "1"})
        if done.returncode:
            raise SystemExit(done.stderr[-3000:])
        rows.append(json.loads(done.stdout.strip().splitlines()[-1]))
    rows.append(
        {
            **rows[0],
            "side": "ifqa / Trainer",
            **{k: rows[0][k] / rows[1][k] for k in rows[0] if k not in ("side", "questions")},
        }
    )
    print(
        f"{machine()}; {args.steps} timed steps of {args.batch_size} questions, {args.passages} passages, "
        f"{args.precision}, run {run}\n"
    )
    print(markdown_table(rows, 2))


def argparse_hidden() -> str:
    import argparse

    return argparse.SUPPRESS


def demo_run() -> str:
    """The demo set's training questions retrieved from its BM25 index (no shared data needed)."""
    target = Path(tempfile.mkdtemp()) / "demo-train.jsonl"
    subprocess.run(
        ["ifqa", "retrieve", "--setting", "demo", "--split", "train", "--k", "5", "-o", str(target), "--no-progress"],
        check=True,
        capture_output=True,
    )
    return str(target)


if __name__ == "__main__":
    main()
