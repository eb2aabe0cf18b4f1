"""BM25 indexing memory and time at three sizes, ifqa's streaming builder beside bm25s's own in-memory
``BM25.index`` (what `ifqa index bm25` ran before), with a linear fit projected to full Wikipedia.

    python benchmarks/bm25_memory.py [--mini FILE] [--wiki800k FILE] [--copies 4] [--reference-synthetic]

Sizes: mini-wiki (76,710 passages), wiki-800k (774,714), and a synthetic collection of ``--copies``
times wiki-800k in which every copy after the first renames about one word in twenty (so its
vocabulary keeps growing, which makes the projection conservative: real vocabularies grow slower).
For the real collections the two builders' arrays are compared: they must be identical.
"""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path

from common import SHARED, WORK, Parser, ifqa, machine, markdown_table, timed

REFERENCE = """
import sys, time
import bm25s
from bm25s.tokenization import Tokenized
from ifqa.retrieval import bm25
from ifqa.retrieval.store import iter_corpus
corpus, out = sys.argv[1:3]
tokenizer = bm25.analyzer(bm25.DEFAULT_PARAMS)
ids = []
batch = []
for _, passage in iter_corpus(corpus):
    batch.append(bm25.document_text(passage))
    if len(batch) == 10000:
        ids.extend(tokenizer.tokenize(batch, update_vocab=True, return_as="ids", show_progress=False)); batch = []
ids.extend(tokenizer.tokenize(batch, update_vocab=True, return_as="ids", show_progress=False))
model = bm25s.BM25(k1=bm25.BM25_K1, b=bm25.BM25_B, method="lucene")
model.index(Tokenized(ids=ids, vocab=tokenizer.get_vocab_dict()), show_progress=False)
model.save(out, show_progress=False)
"""


def synthetic(source: Path, copies: int, target: Path) -> Path:
    """``copies`` x the source collection; copies after the first rename ~5% of words (new vocabulary)."""
    if target.exists():
        return target
    rng = random.Random(0)
    partial = target.with_suffix(".partial")
    with partial.open("w") as out:
        for copy in range(copies):
            with source.open() as lines:
                for line in lines:
                    passage = json.loads(line)
                    passage["id"] = f"{passage['id']}#{copy}"
                    if copy:
                        words = passage["text"].split()
                        passage["text"] = " ".join(
                            f"{w}q{copy}x{rng.randrange(50)}" if rng.random() < 0.05 else w for w in words
                        )
                    out.write(json.dumps(passage) + "\n")
    partial.rename(target)
    return target


def same_arrays(a: Path, b: Path) -> bool:
    import numpy as np

    return all(
        np.array_equal(
            np.load(a / f"{n}.csc.index.npy", mmap_mode="r"), np.load(b / f"{n}.csc.index.npy", mmap_mode="r")
        )
        for n in ("data", "indices", "indptr")
    )


def main() -> None:
    parser = Parser(description=__doc__.splitlines()[0])
    parser.add_argument("--mini", type=Path, help="mini-wiki passages (default: built under benchmarks/.work)")
    parser.add_argument("--wiki800k", type=Path, help="wiki-800k passages (default: built under benchmarks/.work)")
    parser.add_argument("--copies", type=int, default=4)
    parser.add_argument(
        "--reference-synthetic",
        action="store_true",
        help="also run bm25s's in-memory index on the synthetic collection",
    )
    args = parser.parse_args()
    WORK.mkdir(parents=True, exist_ok=True)
    wiki = SHARED / "wiki"
    sources = {
        "mini-wiki": (args.mini, ["enwiki2015_sample_articles.jsonl.gz", "ifqa_contexts.jsonl"]),
        "wiki-800k": (
            args.wiki800k,
            ["enwiki2015_articles.jsonl.gz", "enwiki2021_articles.jsonl.gz", "ifqa_contexts.jsonl"],
        ),
    }
    corpora = {}
    for name, (given, files) in sources.items():
        corpora[name] = given or WORK / f"{name}.jsonl"
        if not corpora[name].exists():
            timed(
                ifqa(
                    "corpus",
                    "build",
                    *[wiki / f for f in files],
                    "-o",
                    corpora[name],
                    "--workers",
                    "2",
                    "--no-progress",
                )
            )
    corpora[f"synthetic {args.copies}x wiki-800k"] = synthetic(
        corpora["wiki-800k"], args.copies, WORK / f"synthetic-{args.copies}x.jsonl"
    )
    rows, points = [], []
    for name, corpus in corpora.items():
        passages = sum(1 for _ in corpus.open())
        ours = WORK / f"bm25-stream-{passages}"
        seconds, peak, _ = timed(ifqa("index", "bm25", "--corpus", corpus, "-o", ours, "--force", "--no-progress"))
        row = {
            "collection": name,
            "passages": passages,
            "builder": "ifqa (streaming)",
            "seconds": seconds,
            "peak MB": peak,
            "identical arrays": "",
        }
        rows.append(row)
        points.append((passages, peak, seconds))
        print(json.dumps(row), flush=True)
        if name.startswith("synthetic") and not args.reference_synthetic:
            continue
        theirs = WORK / f"bm25-reference-{passages}"
        seconds, peak, _ = timed([sys.executable, "-c", REFERENCE, str(corpus), str(theirs)])
        rows.append(
            {
                "collection": name,
                "passages": passages,
                "builder": "bm25s BM25.index (before)",
                "seconds": seconds,
                "peak MB": peak,
                "identical arrays": same_arrays(ours, theirs),
            }
        )
        print(json.dumps(rows[-1]), flush=True)
    import numpy as np

    n, peak, seconds = (np.array(column, dtype=float) for column in zip(*points))
    slope, intercept = np.polyfit(n, peak, 1)
    time_slope, time_intercept = np.polyfit(n, seconds, 1)
    print(f"\nBM25 indexing, {machine()}\n")
    print(markdown_table(rows))
    print(
        f"\nlinear fit of the streaming builder's peak: {intercept:.0f} MB + {slope * 1e3:.3f} MB per 1,000 passages; "
        f"time: {time_slope * 1e6:.1f} s per million passages"
    )
    for total in (21_000_000, 27_500_000):
        print(
            f"projected for {total / 1e6:.1f}M passages: peak {(intercept + slope * total) / 1024:.1f} GB, "
            f"{(time_intercept + time_slope * total) / 3600:.1f} h on this machine"
        )


if __name__ == "__main__":
    main()
