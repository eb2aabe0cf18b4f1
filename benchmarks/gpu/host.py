"""The host's share of the GPU commands, measured on any CPU (``gpu_suite.py --host``): `ifqa index dense`
and `ifqa rerank` run as typed with their models answering at once (``gpu/instant.py``), so their CPU
time, every process summed (workers included), is what feeding the GPU costs. Beside it the
tokenizer's own batch cost, the floor any feeding pays once per text."""

from __future__ import annotations

import json
import statistics
import time

from gpu.dense import collections
from gpu.inputs import passage_texts
from gpu.rerank import contexts, question_examples, write_ifqa_run
from gpu.suite import GOALS, Suite, command, row

BATCH = 512  # the GPU's batch (batching.default_batch_size on CUDA): what the tokenizer is timed on
REPEATS = 2  # each command's least CPU of this many runs: start-up's CPU varies by a few tenths of a second
WORKER_REPEATS = 3  # runs a feed worker count's steady rate is the median of
WORKER_CHUNK = 1024  # passages per chunk where the feed's scaling is measured (``host_workers``)


def tokenizer_cost(tokenizer, first: list[str], second: list[str] | None, max_length: int) -> float:
    """CPU µs per item of the tokenizer alone, in batches of ``BATCH``, padded tensors out (its threads summed)."""
    started = time.process_time()
    for start in range(0, len(first), BATCH):
        tokenizer(
            first[start : start + BATCH],
            second[start : start + BATCH] if second else None,
            truncation="only_second" if second else True,
            max_length=max_length,
            padding=True,
            return_tensors="pt",
        )
    return 1e6 * (time.process_time() - started) / len(first)


def host_dense(suite: Suite, length: int = 128) -> dict:
    """Host CPU per passage of `ifqa index dense` past start-up, beside the tokenizer's own cost."""
    from transformers import AutoTokenizer

    full, small = collections(suite)
    n, n_small = suite.passages, suite.startup_passages
    spent = {}
    for name, corpus in (("startup", small), ("full", full)):
        runs = []
        for attempt in range(REPEATS):
            out = suite.work.new(f"host-dense-{name}-{attempt}")
            _, seconds, result = command(
                "index", "dense", "--corpus", corpus, "-o", out, "--encoder", suite.folders["encoder"],
                "--max-length", length, "--no-progress", "--device", "cpu",
            )  # fmt: skip
            runs.append((seconds, result.cpu_seconds))
        spent[name] = min(runs, key=lambda run: run[1])
    per_passage = 1e6 * (spent["full"][1] - spent["startup"][1]) / (n - n_small)
    tokenizer = AutoTokenizer.from_pretrained(str(suite.folders["encoder"]))
    floor = tokenizer_cost(tokenizer, passage_texts(min(n, 20_000)), None, length)
    ratio = per_passage / floor
    shown = f"{ratio:.2f}x ({per_passage:,.0f} vs {floor:,.0f} µs/passage)"
    suite.goals.judge("host-dense", ratio, GOALS["host"]["dense"], shown, at_most=True)
    return row(
        f"host: `ifqa index dense`, {n:,} passages, {length} tokens, the model answering at once",
        per_passage,
        "µs CPU/psg",
        same=floor,
        note=f"start-up {spent['startup'][0]:.1f} s wall, {spent['startup'][1]:.1f} s CPU ({n_small:,} passages); "
        f"full run {spent['full'][0]:.1f} s wall, {spent['full'][1]:.1f} s CPU; beside it: the tokenizer alone, "
        f"batches of {BATCH}",
    )


def host_rerank(suite: Suite) -> list[dict]:
    """Host CPU per pair of `ifqa rerank` past start-up: the first run over a run file (its passages
    tokenized into the cache) and a second over the same passages (read from it)."""
    from transformers import AutoTokenizer

    depth = suite.size["depth"]
    folder = suite.work.new("host-rerank")
    folder.mkdir()
    questions = -(-suite.pairs // depth)
    n = questions * depth
    questions_file, run, startup_run = write_ifqa_run(folder, questions, depth, 1)
    cache = {"IFQA_CACHE_DIR": str(folder / "cache")}  # the token cache these runs share, the suite's own

    def rerank(run_file, out, repeats: int = REPEATS) -> tuple[float, float, dict]:
        runs = []
        for _ in range(repeats):
            _, seconds, result = command(
                "rerank", "--run", run_file, "--model", suite.folders["reranker"], "--depth", depth,
                "--questions", questions_file, "-o", out, "--json", "--no-progress", "--device", "cpu",
                env=cache,
            )  # fmt: skip
            runs.append((seconds, result.cpu_seconds, json.loads(result.stdout)))
        return min(runs, key=lambda run: run[1])

    startup = rerank(startup_run, folder / "startup-reranked.jsonl")
    first = rerank(run, folder / "first.jsonl", repeats=1)
    again = rerank(run, folder / "again.jsonl")
    if first[2].get("n") != questions:
        raise RuntimeError(f"the reranked run's report lacks its {questions} questions: {first[2]}")
    cold, warm = (1e6 * (spent[1] - startup[1]) / (n - depth) for spent in (first, again))
    examples = question_examples(min(questions, 100))
    from gpu.inputs import demo_passages

    passages = demo_passages()
    by_text = {p["text"]: p for p in passages}
    pairs = [(e.question, c["text"]) for i, e in enumerate(examples) for c in contexts(i, e, depth, passages, by_text)]
    tokenizer = AutoTokenizer.from_pretrained(str(suite.folders["reranker"]))
    floor = tokenizer_cost(tokenizer, [q for q, _ in pairs], [t for _, t in pairs], 512)
    suite.goals.judge("host-rerank", warm, GOALS["host"]["rerank"], f"{warm:,.1f} µs/pair", at_most=True)
    shape = f"host: `ifqa rerank`, {questions:,} questions x top {depth} ({n:,} pairs), the model answering at once"
    return [
        row(
            f"{shape}, passages tokenized into the cache",
            cold,
            "µs CPU/pair",
            same=floor,
            note=f"{first[0]:.1f} s wall, {first[1]:.1f} s CPU; start-up {startup[0]:.1f} s wall, {startup[1]:.1f} "
            f"s CPU; beside it: the tokenizer alone on the pairs, batches of {BATCH}",
        ),
        row(
            f"{shape}, the same passages again (read from the cache)",
            warm,
            "µs CPU/pair",
            same=floor,
            note=f"{again[0]:.1f} s wall, {again[1]:.1f} s CPU",
        ),
    ]


def host_workers(suite: Suite) -> list[dict]:
    """The feed's scaling with the host's cores: `ifqa index dense` and `ifqa rerank` (its passages' tokens
    in the cache) with the model answering at once, each run's steady rate (its first model call to its
    last: ``instant.steady_rate``) with one feed worker process and with two (``IFQA_FEED_WORKERS``), the
    median of ``WORKER_REPEATS`` runs; two should give nearly twice one's rate.

    The index is encoded in chunks of ``WORKER_CHUNK`` passages. A chunk is the feed's item, and the
    suite's 24,096 passages in the default 4,096 are six: the first prepared by the calling process before
    the workers start, five left for two workers, three rounds against one worker's five. That bounds the
    ratio at 5/3 whatever the feed does; in chunks of 1,024 the same passages are 24 items."""
    from gpu.instant import MARKS_ENV, steady_rate
    from ifqa.feeding import WORKERS_ENV

    full, _ = collections(suite)
    depth = suite.size["depth"]
    folder = suite.work.new("host-workers")
    folder.mkdir()
    questions_file, run, _ = write_ifqa_run(folder, -(-suite.pairs // depth), depth, 1)
    cache = {"IFQA_CACHE_DIR": str(folder / "cache")}
    command(*_rerank_args(suite, run, questions_file, folder / "fill.jsonl", depth), env=cache)  # tokens cached

    made = iter(range(1_000_000))

    def rate(args_for, workers: int) -> float:
        """The median steady rate of ``WORKER_REPEATS`` runs, each into a folder of its own."""
        rates = []
        for _ in range(WORKER_REPEATS):
            marks = folder / f"marks-{next(made)}.json"
            out = suite.work.new(f"host-workers-{next(made)}")
            command(*args_for(out), env={**cache, WORKERS_ENV: str(workers), MARKS_ENV: str(marks)})
            rates.append(steady_rate(marks))
        return statistics.median(rates)

    def dense_args(out):
        return ("index", "dense", "--corpus", full, "-o", out, "--encoder", suite.folders["encoder"],
                "--chunk-size", WORKER_CHUNK, "--no-progress", "--device", "cpu")  # fmt: skip

    def rerank_args(out):
        return _rerank_args(suite, run, questions_file, out, depth)

    rows = []
    for key, label, args_for, unit in (
        ("dense", f"`ifqa index dense` (chunks of {WORKER_CHUNK:,})", dense_args, "psg"),
        ("rerank", "`ifqa rerank` (tokens in the cache)", rerank_args, "pairs"),
    ):
        one, two = (rate(args_for, w) for w in (1, 2))
        shown = f"{two / one:.2f}x ({two:,.0f} vs {one:,.0f} {unit}/s)"
        suite.goals.judge(f"host-workers-{key}", two / one, GOALS["host"]["workers"], shown)
        rows.append(
            row(
                f"host: {label}, two feed workers ÷ one, the model answering at once, steady rate",
                two,
                f"{unit}/s",
                same=one,
                note=f"{WORKERS_ENV}=2 beside {WORKERS_ENV}=1, each the median of {WORKER_REPEATS} runs' rate "
                "from the first model call to the last",
            )
        )
    return rows


def _rerank_args(suite: Suite, run_file, questions_file, out, depth: int) -> tuple:
    return ("rerank", "--run", run_file, "--model", suite.folders["reranker"], "--depth", depth,
            "--questions", questions_file, "-o", out, "--no-progress", "--device", "cpu")  # fmt: skip
