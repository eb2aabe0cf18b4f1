"""Retrieval on mini-wiki with IfQA supervised dev: recall, engine speed and memory, index types.

    python benchmarks/retrieval.py            # builds what is missing under benchmarks/.work/

Needs ../shared/data and the pyserini extra. The dense MiniLM index of mini-wiki takes ~30 min of
encoding on 2 CPU cores; build it first (the command is printed if it is missing).
"""

from __future__ import annotations

import json
import shutil
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from common import SHARED, WORK, Parser, ifqa, machine, markdown_table, timed  # noqa: E402

DEV = SHARED / "ifqa" / "full_split" / "dev.json"
CORPUS = WORK / "mini-wiki.jsonl"
DENSE = WORK / "idx-dense-flat"


def build_corpus() -> None:
    if not CORPUS.exists():
        timed(
            ifqa(
                "corpus",
                "build",
                SHARED / "wiki" / "enwiki2015_sample_articles.jsonl.gz",
                SHARED / "wiki" / "ifqa_contexts.jsonl",
                "-o",
                CORPUS,
                "--workers",
                "2",
                "--no-progress",
            )
        )


def build_bm25(backend: str) -> dict:
    folder = WORK / f"idx-{backend}"
    seconds, peak, _ = timed(
        ifqa(
            "index",
            "bm25",
            "--corpus",
            CORPUS,
            "-o",
            folder,
            "--engine",
            backend,
            "--threads",
            "2",
            "--force",
            "--no-progress",
        )
    )
    manifest = json.loads((folder / "manifest.json").read_text())
    return {"engine": backend, "index s": seconds, "index peak MB": peak, "index MB": manifest["bytes"] / 1e6}


def speed(index: Path, questions: list[str]) -> dict:
    """Queries/s one at a time and batched, and the peak memory of the process doing it."""
    code = f"""
import json, resource, sys, time
from ifqa.retrieval.specs import open_index
questions = json.load(open({str(DEV)!r}))
queries = [q["question"] for q in questions]
r = open_index({str(index)!r})
r.search(queries[:5], 20)
t = time.time()
for q in queries: r.search([q], 20, threads=1)
single = len(queries) / (time.time() - t)
t = time.time()
hits = r.search(queries, 20, threads=2)
batched = len(queries) / (time.time() - t)
print(json.dumps({{"single q/s": single, "batched q/s": batched,
                  "search peak MB": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                  "top20": [[p for p, _ in h] for h in hits]}}))
"""
    _, _, result = timed([sys.executable, "-c", code])
    return json.loads(result.stdout.strip().splitlines()[-1])


def recall(indexes: list[Path], label: str, extra: tuple = ()) -> dict:
    output = WORK / f"run-{label}.jsonl"
    seconds, _, result = timed(
        ifqa(
            "retrieve",
            *[a for i in indexes for a in ("--index", i)],
            "--k",
            "100",
            "--questions",
            DEV,
            "-o",
            output,
            "--json",
            "--no-progress",
            *extra,
        )
    )
    report = json.loads(result.stdout)
    row = {"retriever": label}
    for flavour in ("gold", "answer"):
        for k in ("1", "5", "20", "100"):
            row[f"{flavour} R@{k}"] = report["recall"][flavour][k]
    return row


def search_only(index: Path) -> float:
    """FAISS search alone (queries encoded beforehand), one thread, k=20."""
    code = f"""
import json, time, faiss, numpy as np
from ifqa.retrieval.specs import open_index
r = open_index({str(index)!r})
queries = [q["question"] for q in json.load(open({str(DEV)!r}))]
vectors = np.ascontiguousarray(r.encoder.encode_queries(queries))
faiss.omp_set_num_threads(1)
started = time.time()
for row in vectors:
    r.index.search(row[None], 20)
print(len(queries) / (time.time() - started))
"""
    _, _, result = timed([sys.executable, "-c", code])
    return float(result.stdout.strip().splitlines()[-1])


def encode_rate(max_length: int | None) -> float:
    code = f"""
import json, time
from ifqa.retrieval.encoders import load_encoder
passages = [json.loads(line) for _, line in zip(range(6024), open({str(CORPUS)!r}))][5000:]
encoder = load_encoder(max_length={max_length!r})
encoder.encode_passages(passages[:64], 32)
started = time.time()
encoder.encode_passages(passages, 32)
print(len(passages) / (time.time() - started))
"""
    _, _, result = timed([sys.executable, "-c", code])
    return float(result.stdout.strip().splitlines()[-1])


def dense_types() -> list[dict]:
    rows = []
    flat = json.loads((DENSE / "manifest.json").read_text())
    for kind in ("flat", "hnsw", "ivfpq"):
        folder = DENSE if kind == "flat" else WORK / f"idx-dense-{kind}"
        if kind != "flat" and not (folder / "manifest.json").exists():
            shutil.rmtree(folder, ignore_errors=True)
            folder.mkdir(parents=True)
            shutil.copytree(DENSE / "embeddings", folder / "embeddings")
            shutil.copy(DENSE / "offsets.npy", folder / "offsets.npy")
            from ifqa.retrieval import dense

            dense.merge(CORPUS, folder, index_type=kind)
        manifest = json.loads((folder / "manifest.json").read_text())
        rows.append({"index": kind, "index MB": manifest["index_bytes"] / 1e6, "path": folder})
    return rows, flat


def table(rows: list[dict]) -> str:
    return markdown_table(rows, digits=2, skip=("top20", "path"))


def main() -> None:
    Parser(description=__doc__.splitlines()[0]).parse_args()
    WORK.mkdir(parents=True, exist_ok=True)
    print(f"machine: {machine()}\n")
    build_corpus()
    questions = [q["question"] for q in json.loads(DEV.read_text())]
    engines = []
    for backend in ("bm25s", "pyserini"):
        row = build_bm25(backend)
        row.update(speed(WORK / f"idx-{backend}", questions))
        engines.append(row)
    overlap = statistics.fmean(len(set(a) & set(b)) / 20 for a, b in zip(engines[0]["top20"], engines[1]["top20"]))
    print("## BM25 engines, side by side (mini-wiki, 76,710 passages; 700 dev questions, k=20)\n")
    print(table(engines))
    print(f"\nmean top-20 overlap bm25s vs pyserini: {overlap:.3f}")
    print(
        f"ratios bm25s/pyserini: index time {engines[0]['index s'] / engines[1]['index s']:.2f}, "
        f"single q/s {engines[0]['single q/s'] / engines[1]['single q/s']:.2f}, "
        f"batched q/s {engines[0]['batched q/s'] / engines[1]['batched q/s']:.2f}\n"
    )

    seconds, _, _ = timed(
        ifqa(
            "retrieve",
            "--index",
            WORK / "idx-bm25s",
            "--k",
            "20",
            "--questions",
            DEV,
            "-o",
            WORK / "run-walltime.jsonl",
            "--no-progress",
        )
    )
    print(f"wall time of `ifqa retrieve --k 20` for 700 dev questions (bm25s, start-up included): {seconds:.2f} s\n")

    rows = [recall([WORK / "idx-bm25s"], "BM25 (bm25s)"), recall([WORK / "idx-pyserini"], "BM25 (pyserini)")]
    if not (DENSE / "manifest.json").exists():
        print(f"dense index missing; build it with:\n  ifqa index dense --corpus {CORPUS} -o {DENSE}\n")
    else:
        rows.append(recall([DENSE], "dense (MiniLM, flat)"))
        rows.append(recall([WORK / "idx-bm25s", DENSE], "hybrid RRF (bm25s + MiniLM)"))
    print("## Recall on mini-wiki, IfQA supervised dev (700 questions), %\n")
    print(table(rows), "\n")
    if (DENSE / "manifest.json").exists():
        types, flat = dense_types()
        for length in (128, None):
            print(
                f"dense encoding (MiniLM, max length {length or 'model default 256'}): "
                f"{encode_rate(length):.1f} passages/s on CPU (1,024 mini-wiki passages, batch 32)"
            )
        print()
        flat_top = flat_recall = None
        for row in types:
            measured = speed(row["path"], questions)
            row.update({k: measured[k] for k in ("single q/s", "batched q/s", "search peak MB")})
            row["search-only q/s"] = search_only(row["path"])
            gold20 = recall([row["path"]], f"dense-{row['index']}")["gold R@20"]
            if flat_top is None:
                flat_top, flat_recall = measured["top20"], gold20
            row["gold R@20"] = gold20
            row["R@20 / flat"] = gold20 / flat_recall
            row["top-20 overlap with flat"] = statistics.fmean(
                len(set(a) & set(b)) / 20 for a, b in zip(measured["top20"], flat_top)
            )
            row["bytes/passage"] = row["index MB"] * 1e6 / flat["passages"]
        print("## FAISS index types (MiniLM, 384-d)\n")
        print(table(types), "\n")
        for passages in (21_000_000, 27_500_000):
            sizes = ", ".join(f"{r['index']} {r['bytes/passage'] * passages / 1e9:.1f} GB" for r in types)
            print(f"projected dense index size for {passages / 1e6:.1f}M passages: {sizes}")
    for row in engines:
        per = row["index MB"] * 1e6 / 76_710
        print(
            f"projected {row['engine']} index for 21M / 27.5M passages: {per * 21e6 / 1e9:.1f} / {per * 27.5e6 / 1e9:.1f} GB"
        )


if __name__ == "__main__":
    main()
