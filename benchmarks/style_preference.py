"""How much a ranking prefers passages that look like IfQA gold passages, by a property of this
project's collections: the IfQA gold passages are the only ones without a title. For each run:
the questions missed at rank 1, how many of those misses have another question's gold passage at
rank 1, and the share of such passages among the top 5's non-gold passages. BM25 gives the base
rate; a learned model far above it leans on the gold passages' style rather than the question.

    python benchmarks/style_preference.py RUN.jsonl [RUN.jsonl ...]
"""

from __future__ import annotations

import json

from common import Parser, markdown_table


def preference(path: str, depth: int = 5) -> dict:
    rows = [json.loads(line) for line in open(path, encoding="utf-8")]
    missed = [r for r in rows if not (r["ctxs"] and r["ctxs"][0]["gold"])]
    others = [c for r in rows for c in r["ctxs"][:depth] if not c["gold"]]
    return {
        "run": path,
        "questions": len(rows),
        "missed at 1": len(missed),
        "other gold at 1": sum(1 for r in missed if r["ctxs"] and r["ctxs"][0]["title"] == ""),
        f"% untitled in top-{depth} non-gold": 100 * sum(c["title"] == "" for c in others) / max(1, len(others)),
    }


def main() -> None:
    parser = Parser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+", input_file=True)
    parser.add_argument("--depth", type=int, default=5)
    args = parser.parse_args()
    print(markdown_table([preference(run, args.depth) for run in args.runs]))


if __name__ == "__main__":
    main()
