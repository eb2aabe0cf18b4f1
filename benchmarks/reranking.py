"""Cost of counterfactual-aware retrieval on this machine: training the default reranker recipe
(`ifqa train reranker`) and reranking the top 100 of IfQA dev's 700 questions (`ifqa rerank`),
wall time and peak memory, with the gold recall before and after.

    python benchmarks/reranking.py [--collection mini-wiki|wiki-800k] [--model DIR]

Builds the collection and its BM25 index under benchmarks/.work/ when missing. ``--model`` skips
training and times reranking with an existing model.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from common import SHARED, WORK, Parser, ifqa, machine, markdown_table, timed

COLLECTIONS = {
    "mini-wiki": ["enwiki2015_sample_articles.jsonl.gz", "ifqa_contexts.jsonl"],
    "wiki-800k": ["enwiki2015_articles.jsonl.gz", "enwiki2021_articles.jsonl.gz", "ifqa_contexts.jsonl"],
}


def main() -> None:
    parser = Parser(description=__doc__.splitlines()[0])
    parser.add_argument("--collection", choices=sorted(COLLECTIONS), default="mini-wiki")
    parser.add_argument("--model", help="an existing reranker (skips training)")
    parser.add_argument("--depth", type=int, default=100)
    args = parser.parse_args()
    os.environ.setdefault("IFQA_DATA_DIR", str(SHARED / "ifqa"))
    work = WORK / args.collection
    work.mkdir(parents=True, exist_ok=True)
    corpus, index = work / "passages.jsonl", work / "bm25"
    if not corpus.exists():
        timed(
            ifqa(
                "corpus",
                "build",
                *[SHARED / "wiki" / f for f in COLLECTIONS[args.collection]],
                "-o",
                corpus,
                "--workers",
                "2",
                "--no-progress",
            )
        )
    if not (index / "manifest.json").exists():
        timed(ifqa("index", "bm25", "--corpus", corpus, "-o", index, "--no-progress"))
    rows = []
    model = Path(args.model) if args.model else work / "reranker" / "model"
    if not args.model and not (model / "config.json").exists():
        seconds, peak, _ = timed(ifqa("train", "reranker", "--index", index, "--no-progress", "-o", work / "reranker"))
        rows.append({"step": "train reranker (default recipe, 2,400 questions)", "seconds": seconds, "peak MB": peak})
    run = work / "dev-bm25-clean-k100.jsonl"
    seconds, peak, _ = timed(
        ifqa(
            "retrieve",
            "--index",
            index,
            "--setting",
            "supervised",
            "--split",
            "dev",
            "--k",
            100,
            "--query-mode",
            "clean",
            "-o",
            run,
            "--no-progress",
        )
    )
    rows.append({"step": "BM25 (clean queries), top 100, 700 dev questions", "seconds": seconds, "peak MB": peak})
    reranked = work / f"dev-reranked-{args.depth}.jsonl"
    reranked.unlink(missing_ok=True)
    seconds, peak, result = timed(
        ifqa("rerank", "--run", run, "--model", model, "--depth", args.depth, "-o", reranked, "--no-progress", "--json")
    )
    rows.append({"step": f"rerank top {args.depth}, 700 dev questions", "seconds": seconds, "peak MB": peak})
    before = json.loads(timed(ifqa("evaluate", "--run", run, "--json"))[2].stdout)["recall"]["gold"]
    after = json.loads(result.stdout)["recall"]["gold"]
    print(f"{args.collection}, {machine()}\n")
    print(markdown_table(rows))
    print("\ngold recall (%)  " + "  ".join(f"R@{k}" for k in before))
    print("BM25 clean       " + "  ".join(f"{before[k]:.1f}" for k in before))
    print("reranked         " + "  ".join(f"{after[k]:.1f}" for k in after))


if __name__ == "__main__":
    main()
