"""`ifqa train fid` on one process vs N ranks under torchrun: steps/s with start-up apart.

    python benchmarks/distributed.py [--ranks 2] [--steps 30] [--batch-size 4] [--work DIR]

Builds a random-weight T5 (t5-small's shape; --shape base for t5-base's) and a synthetic IfQA-shaped
run from the demo passages, then times, each as a user types it: the plain command, and the same
command under `torchrun --nproc_per_node R -m ifqa -- ...` for R = 1 and R = --ranks. Each is run
twice, for --steps and for 2 steps; the difference gives the steady steps/s and the short run's time
is reported as start-up. On a CPU the ranks share its cores (gloo, one thread each: the plain run
gets them all); on a GPU machine each rank takes a GPU (NCCL) and the table gives the scaling
efficiency. Writes only into the work folder it makes (default: a new temporary folder).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import ROOT, Parser, markdown_table  # noqa: E402

sys.path.insert(0, str(ROOT))

SHAPES = {
    "small": dict(d_model=512, d_ff=2048, num_layers=6, num_heads=8, d_kv=64),
    "base": dict(d_model=768, d_ff=3072, num_layers=12, num_heads=12, d_kv=64),
}


def build(work: Path, shape: str, questions: int) -> tuple[Path, Path]:
    """A random-weight T5 of ``shape`` with a tokenizer trained on the demo text, and a run."""
    import torch
    from transformers import T5Config

    from ifqa.datasets.demo import load_demo
    from ifqa.readers.fid.model import FiDT5
    from tests.readers.tiny_models import train_tokenizer

    model = work / "t5"
    tokenizer = train_tokenizer(model, vocab=4000)
    torch.manual_seed(0)
    config = T5Config(
        vocab_size=len(tokenizer),
        num_decoder_layers=SHAPES[shape]["num_layers"],
        dropout_rate=0.1,
        pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id,
        decoder_start_token_id=tokenizer.pad_token_id,
        **SHAPES[shape],
    )
    FiDT5(config).save_pretrained(model)
    examples = load_demo("train") + load_demo("dev")
    run = work / "run.jsonl"
    with open(run, "w", encoding="utf-8") as handle:
        for i in range(questions):
            e = examples[i % len(examples)]
            ctxs = [
                {"id": f"{i}-{j}", "title": "", "text": e.context[j % len(e.context)] if e.context else e.question}
                for j in range(10)
            ]
            handle.write(json.dumps({"qid": str(i), "question": e.question, "answers": e.answers, "ctxs": ctxs}) + "\n")
    return model, run


def timed(command: list[str], env: dict) -> float:
    started = time.perf_counter()
    result = subprocess.run(command, capture_output=True, text=True, env=env)
    if result.returncode != 0:
        raise SystemExit(f"distributed: {' '.join(command[:8])} ... failed: {result.stderr.strip().splitlines()[-1:]}")
    return time.perf_counter() - started


def main() -> None:
    parser = Parser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", type=int, default=2)
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--batch-size", type=int, default=4, help="global questions per step")
    parser.add_argument("--shape", choices=sorted(SHAPES), default="small")
    parser.add_argument("--work", type=Path, help="a folder to create (it must not exist)")
    args = parser.parse_args()
    if args.ranks < 1 or args.steps < 3 or args.batch_size < 1 or args.batch_size % args.ranks:
        parser.exit(1, "distributed: need --ranks >= 1, --steps >= 3 and a --batch-size that --ranks divides\n")
    if args.work and args.work.exists():
        parser.exit(1, f"distributed: --work {args.work} exists; name a folder for the benchmark to create\n")
    work = args.work or Path(tempfile.mkdtemp(prefix="ifqa-distributed-"))
    work.mkdir(parents=True, exist_ok=True)
    import torch

    device = "cuda" if torch.cuda.is_available() else "cpu"
    model, run = build(work, args.shape, 64)
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    fid = [
        "train",
        "fid",
        "--run",
        str(run),
        "--model",
        str(model),
        "--batch-size",
        str(args.batch_size),
        "--n-context",
        "10",
        "--text-maxlength",
        "200",
        "--warmup-steps",
        "0",
        "--no-progress",
        "--no-compile",
    ]
    launchers = {"plain `ifqa train fid`": lambda: [sys.executable, "-m", "ifqa"]}
    for ranks in sorted({1, args.ranks}):
        launchers[f"torchrun, {ranks} rank{'s' * (ranks > 1)}"] = lambda ranks=ranks: [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--standalone",
            "--nproc_per_node",
            str(ranks),
            "-m",
            "ifqa",
            "--",
        ]
    header = (
        f"`ifqa train fid`, t5-{args.shape} shape (random weights), {args.batch_size} questions x 10 passages x "
        f"200 tokens a step, {args.steps} steps, {device} ({os.cpu_count()} CPU cores"
        f"{', ' + torch.cuda.get_device_name() if device == 'cuda' else ''})"
    )
    print(header, flush=True)
    rows, plain = [], None
    for n, (name, launcher) in enumerate(launchers.items()):
        short = timed(launcher() + fid + ["--steps", "2", "-o", str(work / f"short-{n}")], env)
        long = timed(launcher() + fid + ["--steps", str(args.steps), "-o", str(work / f"long-{n}")], env)
        rate = (args.steps - 2) / (long - short)
        plain = plain or rate
        rows.append(
            {
                "launch": name,
                "start-up s": round(short, 1),
                "steps/s": f"{rate:.3f}",
                "questions/s": f"{rate * args.batch_size:.2f}",
                "vs plain": f"{rate / plain:.2f}",
            }
        )
        print(f"{name}: start-up {short:.1f} s, {rate:.3f} steps/s", flush=True)
    print("\n" + markdown_table(rows))


if __name__ == "__main__":
    main()
