"""LLM reader plumbing: requests/s and cache hit rate against a local OpenAI-protocol server with
injected latency and failures, and prompt lengths per mode. No model is involved: the server
answers from a table, so this measures ifqa's concurrency, retries and cache, not a model.

    python benchmarks/llm_reader.py [--questions N]
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).parent))
from common import SHARED, Parser, machine  # noqa: E402

from ifqa.artifacts import Example  # noqa: E402
from ifqa.datasets.demo import load_demo  # noqa: E402
from ifqa.datasets.ifqa import load_examples  # noqa: E402
from ifqa.llm import openai_backend  # noqa: E402
from ifqa.llm.cache import ResponseCache  # noqa: E402
from ifqa.llm.session import ModelSession  # noqa: E402
from ifqa.readers.llm import reader as llm  # noqa: E402
from ifqa.readers.llm.config import LLMReaderConfig  # noqa: E402
from tests.readers.fake_openai import FakeOpenAI  # noqa: E402


def questions(n: int) -> tuple[list[Example], list[Example], str]:
    dev_path = SHARED / "ifqa" / "full_split" / "dev.json"
    if dev_path.exists():
        train = load_examples(SHARED / "ifqa" / "full_split" / "train.json")
        return load_examples(dev_path)[:n], train, "IfQA supervised dev"
    return load_demo("dev"), load_demo("train"), "demo dev"


def run(examples, train, server, cache_path, concurrency, mode="qa", demos=4, run_path=None, setting="supervised"):
    backend = openai_backend.OpenAIBackend("bench", server.url, "k", backoff=0.05, timeout=5.0)
    config = LLMReaderConfig(model="bench", mode=mode, demos=demos, concurrency=concurrency)
    session = ModelSession(backend, config, ResponseCache(cache_path))
    reader = llm.LLMReader(session, config, train, {e.question for e in examples}, rationale_setting=setting)
    started = time.time()
    with tempfile.TemporaryDirectory() as tmp:
        llm.read_to_file(reader, examples, Path(tmp) / "p.jsonl", run_path=run_path, progress=False)
    return time.time() - started, reader


def main() -> None:
    import logging

    logging.basicConfig(level=logging.ERROR)  # retries are expected here; keep the tables readable
    parser = Parser()
    parser.add_argument("--questions", type=int, default=200)
    args = parser.parse_args()
    examples, train, label = questions(args.questions)
    answers = {e.question: e.answers[0] for e in examples}
    print(f"machine: {machine()}; {len(examples)} questions ({label}), server latency 0.2 s, 10% injected failures\n")
    print(
        "| concurrency | run | seconds | answered requests/s | answered requests (retries not counted) | cache hits | hit rate |"
    )
    print("|---|---|---|---|---|---|---|")
    for concurrency in (1, 4, 16):
        with tempfile.TemporaryDirectory() as tmp, FakeOpenAI(answers, latency=0.2, failure_rate=0.1) as server:
            cache = Path(tmp) / "cache.sqlite"
            for name in ("first", "rerun"):
                seconds, reader = run(examples, train, server, cache, concurrency)
                c = reader.session.counters
                total = c.requests + c.cache_hits
                print(
                    f"| {concurrency} | {name} | {seconds:.2f} | {c.requests / seconds:.1f} | {c.requests} | "
                    f"{c.cache_hits} | {100 * c.cache_hits / total:.0f}% |"
                )
    print("\nprompt length (estimated tokens) per mode, 4 demonstrations, open-book with 5 passages:\n")
    print("| mode | mean | max |")
    print("|---|---|---|")
    run_file = ROOT / "benchmarks" / ".work" / "run-BM25 (bm25s).jsonl"
    for mode in ("qa", "cot", "genread", "open"):
        if mode == "open" and not run_file.exists():
            print("| open | (run benchmarks/retrieval.py first) | |")
            continue
        with tempfile.TemporaryDirectory() as tmp, FakeOpenAI(answers) as server:
            _, reader = run(
                examples,
                train,
                server,
                Path(tmp) / "c.sqlite",
                16,
                mode=mode,
                run_path=run_file if mode == "open" else None,
            )
            lengths = reader.prompt_lengths
            print(f"| {mode} | {statistics.fmean(lengths):.0f} | {max(lengths)} |")


if __name__ == "__main__":
    main()
