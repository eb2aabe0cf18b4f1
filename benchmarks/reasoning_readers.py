"""Reasoning readers and the judge against stand-in endpoints: for every shape a server sends a thinking
model's reply in, how many final answers `ifqa read llm` extracts (the stand-in answers correctly, after
a thinking that holds a wrong draft), and how many thinkings cut short became predictions (must be 0);
then reading and judging against an endpoint that takes --latency seconds per reply, wall time beside
questions x latency / concurrency. The commands run in-process through the CLI, as a user's would.

    python benchmarks/reasoning_readers.py [--questions 50] [--latency 0.5] [--concurrency 4]
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).parent))
from common import SHARED, Parser, machine, markdown_table  # noqa: E402

from tests.in_process import run_in_process  # noqa: E402
from tests.readers.fake_openai import SHAPES, FakeOpenAI  # noqa: E402


def question_file(n: int, folder: Path) -> tuple[Path, dict[str, str], str]:
    """The first ``n`` questions of IfQA dev where ../shared has it (else the demo dev set), as a file."""
    from ifqa.datasets.demo import load_demo
    from ifqa.datasets.ifqa import load_examples

    dev = SHARED / "ifqa" / "full_split" / "dev.json"
    examples, label = (load_examples(dev)[:n], "IfQA supervised dev") if dev.exists() else (load_demo("dev"), "demo")
    path = folder / "questions.jsonl"
    path.write_text(
        "".join(json.dumps({"idx": e.qid, "question": e.question, "answers": e.answers}) + "\n" for e in examples)
    )
    return path, {e.question: e.answers[0] for e in examples}, f"{label}, {len(examples)} questions"


def cli(*args, env: dict) -> dict:
    result = run_in_process(*map(str, args), env=env)
    if result.returncode != 0:
        raise SystemExit(result.stderr)
    return result


def main() -> None:
    parser = Parser()
    parser.add_argument("--questions", type=int, default=50)
    parser.add_argument("--latency", type=float, default=0.5, help="Seconds the stand-in takes per reply.")
    parser.add_argument("--concurrency", type=int, default=4)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        env = {**os.environ, "IFQA_CACHE_DIR": str(folder / "cache"), "OPENAI_API_KEY": "k"}
        questions, answers, label = question_file(args.questions, folder)
        n = len(answers)
        print(f"machine: {machine()}; {label}\n")
        rows = []
        for shape in SHAPES:
            for mode in ("qa", "cot"):
                with FakeOpenAI(answers) as server:
                    server.thinking = shape
                    out = folder / f"{shape}-{mode}.jsonl"
                    common = ["--questions", questions, "--base-url", server.url, "--demos", "0", "--mode", mode]
                    cli("read", "llm", *common, "--model", "deepseek-r1-stand-in", "-o", out, "--no-progress", env=env)
                    records = [json.loads(line) for line in out.read_text().splitlines()]
                    report = json.loads(cli("evaluate", "--predictions", out, "--json", env=env).stdout)
                    cut = folder / f"{shape}-{mode}-cut.jsonl"
                    cli("read", "llm", *common, "--model", "m", "--thinking", "on", "--max-tokens", "12", "-o", cut,
                        "--no-progress", env=env)  # fmt: skip
                    drafts = [json.loads(line) for line in cut.read_text().splitlines()]
                    rows.append(
                        {
                            "shape": shape,
                            "mode": mode,
                            "final answers (EM)": f"{round(report['em'] * n / 100)} / {n}",
                            "cut short: truncated": sum(bool(r.get("truncated")) for r in drafts),
                            "cut short: predictions": sum(bool(r["prediction"]) for r in drafts),
                            "draft read as answer": sum("unknown" in r["prediction"] for r in records),
                        }
                    )
        print(markdown_table(rows))
        ideal = n * args.latency / args.concurrency
        timing = []
        with FakeOpenAI(answers, latency=args.latency) as server:
            out = folder / "timed.jsonl"
            started = time.time()
            cli("read", "llm", "--questions", questions, "--base-url", server.url, "--demos", "0", "--model", "m",
                "--concurrency", args.concurrency, "-o", out, "--no-progress", env=env)  # fmt: skip
            wall = time.time() - started
            seconds = json.loads(Path(f"{out}.manifest.json").read_text())["seconds"]
            timing.append({"job": "read llm", "wall s": wall, "reading s": seconds, "ideal s": ideal})
            started = time.time()
            judged = folder / "judged.jsonl"
            cli("judge", "--predictions", out, "--questions", questions, "--base-url", server.url, "--model", "j",
                "--concurrency", args.concurrency, "-o", judged, "--no-progress", env=env)  # fmt: skip
            wall = time.time() - started
            seconds = json.loads(Path(f"{judged}.manifest.json").read_text())["seconds"]
            timing.append({"job": "judge", "wall s": wall, "reading s": seconds, "ideal s": ideal})
        for row in timing:
            row["reading / ideal"] = row["reading s"] / row["ideal s"]
        print(f"\n{n} replies at {args.latency} s each, --concurrency {args.concurrency}:\n")
        print(markdown_table(timing, digits=2))


if __name__ == "__main__":
    main()
