"""Latency and throughput of `ifqa serve`'s `POST /search`: p50/p95 over 200 questions, then
requests/s at concurrency 1, 4 and 16, for BM25 and BM25 + a reranker, on the demo collection and
on mini-wiki (IfQA supervised dev questions).

    python benchmarks/serve_latency.py [--rerank MODEL] [--mini-index DIR] [--requests 200]
                                       [--rerank-runtimes torch auto-int8] [--collections demo] [--concurrency 1]

Each configuration runs in its own `ifqa serve` process on 127.0.0.1 (started, warmed with one
request, measured, stopped); the client is plain urllib in threads. Without ``--mini-index`` the
mini-wiki collection and its BM25 index are built under benchmarks/.work/ when missing.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from common import SHARED, WORK, Parser, free_port, ifqa, machine, markdown_table, timed

from ifqa.registry import RuntimeNames


def questions_of(setting: str, split: str, n: int) -> list[str]:
    from ifqa.datasets import QuestionSource

    questions = [e.question for e in QuestionSource(setting, split).load().examples]
    return [questions[i % len(questions)] for i in range(n)]


def start(args: list[str], log: Path) -> tuple[subprocess.Popen, str]:
    port = free_port()
    process = subprocess.Popen(ifqa("serve", "--port", port, *args), stdout=log.open("w"), stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    for _ in range(600):
        if process.poll() is not None:
            raise SystemExit(f"ifqa serve exited:\n{log.read_text()}")
        try:
            urllib.request.urlopen(url + "/health", timeout=5).read()
            return process, url
        except OSError:
            time.sleep(0.5)
    raise SystemExit("ifqa serve did not start")


def search(url: str, question: str, k: int) -> float:
    body = json.dumps({"question": question, "k": k}).encode()
    request = urllib.request.Request(url + "/search", data=body, headers={"Content-Type": "application/json"})
    started = time.perf_counter()
    with urllib.request.urlopen(request, timeout=600) as response:
        response.read()
    return time.perf_counter() - started


def measure(url: str, questions: list[str], k: int, concurrency: int) -> tuple[list[float], float]:
    started = time.perf_counter()
    with ThreadPoolExecutor(concurrency) as pool:
        latencies = list(pool.map(lambda q: search(url, q, k), questions))
    return latencies, len(questions) / (time.perf_counter() - started)


def percentile(values: list[float], q: float) -> float:
    return statistics.quantiles(values, n=100, method="inclusive")[int(q) - 1]


def main() -> None:
    parser = Parser(description=__doc__.splitlines()[0])
    parser.add_argument("--rerank", help="a reranker (folder from `ifqa train reranker`, or hub id)")
    parser.add_argument("--rerank-depth", type=int, default=100)
    parser.add_argument("--mini-index", help="an existing mini-wiki BM25 index")
    parser.add_argument("--requests", type=int, default=200, help="questions per measurement (BM25)")
    parser.add_argument("--rerank-requests", type=int, default=100, help="questions per measurement with the reranker")
    parser.add_argument("--k", type=int, default=10)
    parser.add_argument(
        "--rerank-runtimes",
        nargs="+",
        default=["torch"],
        choices=list(RuntimeNames(quantized=True)),
        help="reranker runtimes to serve with, each its own row (torch, onnx-int8, auto-int8, ...)",
    )
    parser.add_argument("--collections", nargs="+", default=["demo", "mini-wiki"], choices=["demo", "mini-wiki"])
    parser.add_argument(
        "--concurrency", nargs="+", type=int, default=[1, 4, 16], help="client counts (1 gives p50/p95)"
    )
    args = parser.parse_args()
    os.environ.setdefault("IFQA_DATA_DIR", str(SHARED / "ifqa"))
    WORK.mkdir(parents=True, exist_ok=True)
    mini_index = Path(args.mini_index) if args.mini_index else WORK / "mini-wiki" / "bm25"
    if "mini-wiki" in args.collections and not args.mini_index and not (mini_index / "manifest.json").exists():
        corpus = WORK / "mini-wiki" / "passages.jsonl"
        corpus.parent.mkdir(parents=True, exist_ok=True)
        if not corpus.exists():
            timed(
                ifqa(
                    "corpus",
                    "build",
                    SHARED / "wiki" / "enwiki2015_sample_articles.jsonl.gz",
                    SHARED / "wiki" / "ifqa_contexts.jsonl",
                    "-o",
                    corpus,
                    "--workers",
                    "2",
                    "--no-progress",
                )
            )
        timed(ifqa("index", "bm25", "--corpus", corpus, "-o", mini_index, "--no-progress"))
    collections = [
        ("demo", [], ("demo", "dev")),
        ("mini-wiki", ["--index", str(mini_index), "--setting", "supervised"], ("supervised", "dev")),
    ]
    rows = []
    pipelines = [(None, None)] + [(args.rerank, backend) for backend in args.rerank_runtimes if args.rerank]
    for name, serve_args, (setting, split) in [c for c in collections if c[0] in args.collections]:
        for reranker, backend in pipelines:
            extra = []
            if reranker:
                label, _, quantize = backend.partition("-")
                extra = [
                    "--rerank",
                    reranker,
                    "--rerank-depth",
                    str(args.rerank_depth),
                    "--rerank-runtime",
                    label,
                    *(["--rerank-quantize", quantize] if quantize else []),
                ]
            n = args.rerank_requests if reranker else args.requests
            questions = questions_of(setting, split, n)
            process, url = start(
                serve_args + extra, WORK / f"serve-{name}{'-rerank-' + backend if reranker else ''}.log"
            )
            try:
                search(url, questions[0], args.k)  # warm-up: first-request imports and caches
                row = {
                    "collection": name,
                    "pipeline": f"BM25 + rerank top {args.rerank_depth} ({backend})" if reranker else "BM25",
                    "questions": n,
                }
                for concurrency in args.concurrency:
                    latencies, throughput = measure(url, questions, args.k, concurrency)
                    if concurrency == 1:
                        row["p50 ms"] = 1000 * statistics.median(latencies)
                        row["p95 ms"] = 1000 * percentile(latencies, 95)
                    row[f"req/s c={concurrency}"] = throughput
                rows.append(row)
                print(json.dumps(row), flush=True)
            finally:
                process.terminate()
                process.wait(30)
    print(f"\n`ifqa serve` POST /search, k={args.k}; {machine()}\n")
    print(markdown_table(rows))


if __name__ == "__main__":
    main()
