"""Iterative reading's host time per step: prompt building, retrieval and parsing, against a stand-in
endpoint that answers at once (zero latency), so what is measured is ifqa's side of the loop, which
must stay well under a model's time per step (goal: under 20 ms). The stand-in searches the question's
main clause, then its premise, then answers (three steps). On mini-wiki (BM25, 76,710 passages) with
IfQA dev where ../shared has them, else the demo set.

    python benchmarks/iterative_reading.py [--questions 200] [--k 3]
"""

from __future__ import annotations

import json
import os
import re
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).parent))
from common import SHARED, WORK, Parser, ifqa, machine, markdown_table, timed  # noqa: E402

from tests.in_process import run_in_process  # noqa: E402
from tests.readers.fake_openai import FakeOpenAI  # noqa: E402


def collection() -> tuple[str, str]:
    """A BM25 index of mini-wiki (built once into benchmarks/.work), else the demo index."""
    articles = SHARED / "wiki" / "enwiki2015_sample_articles.jsonl.gz"
    if not articles.exists():
        return "demo:bm25", "demo collection (4,151 passages)"
    corpus, index = WORK / "mini-wiki.jsonl", WORK / "idx-bm25s"
    WORK.mkdir(parents=True, exist_ok=True)
    if not corpus.exists():
        timed(ifqa("corpus", "build", articles, SHARED / "wiki" / "ifqa_contexts.jsonl", "-o", corpus, "--no-progress"))
    if not (index / "manifest.json").exists():
        timed(ifqa("index", "bm25", "--engine", "bm25s", "--corpus", corpus, "-o", index, "--force", "--no-progress"))
    return str(index), "mini-wiki (76,710 passages)"


def questions(n: int, folder: Path) -> tuple[Path, dict[str, str]]:
    from ifqa.datasets.demo import load_demo
    from ifqa.datasets.ifqa import load_examples

    dev = SHARED / "ifqa" / "full_split" / "dev.json"
    examples = load_examples(dev)[:n] if dev.exists() else load_demo("dev")
    path = folder / "questions.jsonl"
    path.write_text(
        "".join(json.dumps({"idx": e.qid, "question": e.question, "answers": e.answers}) + "\n" for e in examples)
    )
    return path, {e.question: e.answers[0] for e in examples}


def main() -> None:
    parser = Parser()
    parser.add_argument("--questions", type=int, default=200)
    parser.add_argument("--k", type=int, default=3)
    args = parser.parse_args()
    index, label = collection()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        path, gold = questions(args.questions, folder)

        def script(prompt: str, body: dict) -> str:
            question = re.search(r"Question: (.*)", prompt).group(1).strip()
            done = prompt.count("<result>\n")
            if done < 2:
                return f"<search>{question.split(',')[-1 if done == 0 else 0]}</search>"
            return f"<answer>{gold.get(question, '')}</answer>"

        env = {**os.environ, "IFQA_CACHE_DIR": str(folder / "cache"), "OPENAI_API_KEY": "k"}
        with FakeOpenAI({}) as server:
            server.script = script
            out = folder / "p.jsonl"
            started = time.perf_counter()
            result = run_in_process("read", "iterative", "--questions", path, "--model", "m", "--base-url",
                                    server.url, "--index", index, "--k", args.k, "--max-steps",
                                    "5", "--concurrency", "8", "-o", out, "--no-progress", env=env)  # fmt: skip
            wall = time.perf_counter() - started
            if result.returncode != 0:
                raise SystemExit(result.stderr)
        manifest = json.loads(Path(f"{out}.manifest.json").read_text())
        records = [json.loads(line) for line in out.read_text().splitlines()]
        steps = sum(len(r["steps"]) for r in records)
        print(f"machine: {machine()}; {len(records)} IfQA questions on {label}, k={args.k}, zero-latency stand-in\n")
        print(
            markdown_table(
                [
                    {
                        "steps": steps,
                        "host ms per step (prompt, retrieval, parsing)": manifest["host_ms_per_step"],
                        "wall ms per step (HTTP to the stand-in included)": 1000 * wall / steps,
                        "requests": manifest["counters"]["requests"],
                    }
                ],
                digits=2,
            )
        )


if __name__ == "__main__":
    main()
