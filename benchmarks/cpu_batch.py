"""Rows per batch on a CPU: how fast the default encoder and a cross-encoder of its shape run at each batch
size, in one run, the sizes alternated so that the machine's drift falls on all of them alike.

- passages as ``ifqa index dense`` encodes them (title and text, at 128 and at 256 tokens);
- questions as ``ifqa retrieve --index demo:dense`` encodes them (IfQA's, given ``--questions``; else the
  demo's questions);
- (question, passage) pairs as ``ifqa rerank`` scores them (all-MiniLM-L6-v2 with a fresh scoring head,
  what ``ifqa train reranker`` starts from: its speed is its shape's).

Each row is the median seconds over ``--repeats`` of the same inputs (fp32, the model loaded and warmed
first), and its rate as a ratio to the batch the CPU took by default before (64 rows). A batch is planned
as the commands plan it: longest first, so its padding is the same small share at every size.

Then the whole commands as typed, start-up included, at their default batch beside ``--batch-size 64``,
alternated: ``ifqa index dense`` over ``--command-passages`` passages and ``ifqa rerank`` of one question
over as many, the reranker on each ``--runtimes`` (torch, and ONNX Runtime and OpenVINO where installed;
each exported once before it is timed).

    python benchmarks/cpu_batch.py [--passages 512] [--repeats 3] [--sizes 8,16,32,64] [--questions FILE]
                                   [--command-passages 600] [--runtimes torch,onnx,openvino]
"""

from __future__ import annotations

import argparse
import gzip
import importlib.util
import json
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import (  # noqa: E402
    Parser,
    machine,
    markdown_table,
    minilm_models,
    one_question_run,
    read_questions,
    whole_number,
)

from ifqa.datasets.demo import packaged_passages  # noqa: E402

BEFORE = 64  # batching.default_batch_size's CPU rows until this benchmark
SPEC = {"onnx": "onnxruntime", "openvino": "openvino"}  # each runtime's package


def workloads(passages: list[dict], questions: list[str], encoder: str, cross: str, sizes: list[int]):
    """name -> a function of the batch size running one pass over its inputs (models loaded once)."""
    from ifqa.retrieval.encoders import SentenceEncoder
    from ifqa.retrieval.rerank import CrossEncoderReranker

    at_128 = SentenceEncoder(encoder, device="cpu", max_length=128)
    at_256 = SentenceEncoder(encoder, device="cpu", max_length=256)
    texts = [[p["text"] for p in passages[i : i + 16]] for i in range(0, len(passages), 16)]  # 16 a question
    groups = [(questions[n % len(questions)], group, [0.0] * len(group)) for n, group in enumerate(texts)]
    rerankers = {size: CrossEncoderReranker(cross, device="cpu", batch_size=size) for size in sizes}

    return {
        f"passages, 128 tokens ({len(passages)})": lambda size: at_128.encode_passages(passages, batch_size=size),
        f"passages, 256 tokens ({len(passages)})": lambda size: at_256.encode_passages(passages, batch_size=size),
        f"questions ({len(questions)})": lambda size: at_128.encode_queries(questions, batch_size=size),
        f"pairs, 256 tokens ({len(passages)})": lambda size: rerankers[size].score_many(groups),
    }


def demo_or_read(path: str | None) -> list[str]:
    """``--questions``' questions, else the demo's."""
    if path is None:
        from ifqa.datasets.demo import load_demo

        return [example.question for example in load_demo()]
    return read_questions(path)


def sizes_list(text: str) -> list[int]:
    """``--sizes``: batch sizes, comma-separated, each at least 1."""
    return [whole_number(1)(part) for part in text.split(",")]


def runtimes_list(text: str) -> list[str]:
    """``--runtimes``: torch and the exported runtimes, comma-separated (those not installed are left out)."""
    names = text.split(",")
    unknown = [name for name in names if name != "torch" and name not in SPEC]
    if unknown:
        raise argparse.ArgumentTypeError(f"{unknown[0]!r} is not one of torch, {', '.join(SPEC)}")
    return [name for name in names if name == "torch" or importlib.util.find_spec(SPEC[name])]


def alternated(timings: dict[str, Callable[[], list[str]]], repeats: int) -> dict[str, float]:
    """Median wall seconds of each command (made anew each time: a new output path), alternated ``repeats`` times."""
    seconds: dict[str, list[float]] = {name: [] for name in timings}
    for _ in range(repeats):
        for name, command in timings.items():
            started = time.perf_counter()
            result = subprocess.run([sys.executable, "-m", "ifqa", *command()], capture_output=True, text=True)
            if result.returncode:
                raise SystemExit(result.stderr[-2000:])
            seconds[name].append(time.perf_counter() - started)
    return {name: statistics.median(values) for name, values in seconds.items()}


def commands(passages: list[dict], cross: str, runtimes: list[str], work: Path, repeats: int) -> list[dict]:
    """The whole commands at their default batch and at 64 rows (every output written to a new path)."""
    corpus, run, questions = one_question_run(work, passages)
    made = iter(range(10**6))
    shapes = {
        "ifqa index dense": lambda: ["index", "dense", "--corpus", str(corpus), "-o", str(work / f"ix{next(made)}")]
    }
    for runtime in runtimes:
        shapes[f"ifqa rerank --runtime {runtime}"] = lambda runtime=runtime: [
            *("rerank", "--run", str(run), "--model", cross, "--questions", str(questions)),
            *("-o", str(work / f"rr{next(made)}.jsonl"), "--depth", str(len(passages)), "--runtime", runtime),
        ]
    rows = []
    for name, shape in shapes.items():
        subprocess.run([sys.executable, "-m", "ifqa", *shape(), "--device", "cpu"], capture_output=True, check=True)
        both = {"default": [], "--batch-size 64": ["--batch-size", str(BEFORE)]}
        timings = {
            label: lambda shape=shape, extra=extra: [*shape(), *extra, "--device", "cpu", "--no-progress"]
            for label, extra in both.items()
        }
        median = alternated(timings, repeats)
        rows.append(
            {
                "command": f"{name} ({len(passages)})",
                "default s": median["default"],
                "--batch-size 64 s": median["--batch-size 64"],
                "ratio": median["--batch-size 64"] / median["default"],
            }
        )
    return rows


def main() -> None:
    parser = Parser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--passages", type=int, default=512)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--sizes", type=sizes_list, default=[8, 16, 32, 64])
    parser.add_argument("--questions", input_file=True)
    parser.add_argument("--command-passages", type=int, default=600, at_least=0)
    parser.add_argument("--runtimes", type=runtimes_list, default="torch,onnx,openvino")
    args = parser.parse_args()
    with gzip.open(packaged_passages(), "rt", encoding="utf-8") as handle:
        passages = [json.loads(line) for _, line in zip(range(max(args.passages, args.command_passages)), handle)]
    questions = demo_or_read(args.questions)
    print(f"machine: {machine()}\n")
    with tempfile.TemporaryDirectory() as tmp:
        encoder, cross = minilm_models(Path(tmp))
        rows = []
        for name, run in workloads(passages[: args.passages], questions, encoder, cross, args.sizes).items():
            run(args.sizes[0])  # warmed: the first call pays for kernels and caches
            seconds = {size: [] for size in args.sizes}
            for _ in range(args.repeats):
                for size in args.sizes:
                    started = time.perf_counter()
                    run(size)
                    seconds[size].append(time.perf_counter() - started)
            median = {size: statistics.median(seconds[size]) for size in args.sizes}
            base = median.get(BEFORE)
            for size in args.sizes:
                rows.append(
                    {
                        "inputs": name,
                        "rows per batch": size,
                        "seconds (median)": median[size],
                        f"rate ÷ {BEFORE} rows'": base / median[size] if base else float("nan"),
                    }
                )
            print(markdown_table(rows[-len(args.sizes) :], digits=2), flush=True)
            print()
        if args.command_passages:
            whole = commands(passages[: args.command_passages], cross, args.runtimes, Path(tmp), args.repeats)
            print(f"whole commands, median of {args.repeats} alternated\n")
            print(markdown_table(whole, digits=2))


if __name__ == "__main__":
    main()
