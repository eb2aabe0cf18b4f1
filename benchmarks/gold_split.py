"""A reader's EM split by whether a gold passage was among the passages it read, and the EM that split
projects at another retrieval level (issue #82: how a reader measured where retrieval finds the gold
passage often would score where it finds it less often).

    python benchmarks/gold_split.py --predictions P.jsonl --run RUN.jsonl [--levels 60,45]

Each prediction records how many passages it read (``passages``, as ``ifqa read`` writes it); a question
counts as "gold read" when one of its run's first that-many passages is flagged ``gold`` (``ifqa
retrieve`` flags them). EM is ``ifqa evaluate``'s (SQuAD v1.1 normalization, best over the answers). The
projection is a weighted mean, p x EM(gold read) + (1 - p) x EM(none read), at each level p: a
projection, not a measurement.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import Parser, markdown_table  # noqa: E402

from ifqa.eval.answers import best_over_answers, exact_match  # noqa: E402


def levels(text: str) -> list[float]:
    return [float(part) for part in text.split(",") if part.strip()]


def main() -> None:
    parser = Parser(description=__doc__.splitlines()[0])
    parser.add_argument("--predictions", required=True, input_file=True, help="predictions (`ifqa read`)")
    parser.add_argument("--run", required=True, input_file=True, help="the run they read (`ifqa retrieve`)")
    parser.add_argument("--levels", type=levels, default=[60.0, 45.0], help="gold-read shares to project at, in %%")
    args = parser.parse_args()
    with args.run.open(encoding="utf-8") as handle:
        run = {record["qid"]: record for record in map(json.loads, handle)}
    groups: dict[str, list[float]] = {"gold read": [], "none read": []}
    with args.predictions.open(encoding="utf-8") as handle:
        for number, record in enumerate(map(json.loads, handle), 1):
            question = run.get(record["qid"])
            if question is None:
                parser.exit(1, f"gold_split: {args.predictions}:{number}: qid {record['qid']!r} is not in {args.run}\n")
            read = question["ctxs"][: int(record.get("passages") or 0)]
            answers = question["answers"]
            score = best_over_answers(exact_match, record["prediction"], answers) if answers else 0.0
            groups["gold read" if any(ctx.get("gold") for ctx in read) else "none read"].append(score)
    em = {name: 100 * sum(scores) / len(scores) if scores else 0.0 for name, scores in groups.items()}
    rows = [{"questions": name, "n": len(scores), "EM": em[name]} for name, scores in groups.items()]
    total = sum(len(scores) for scores in groups.values())
    rows.append({"questions": "all", "n": total, "EM": sum(map(sum, groups.values())) * 100 / max(total, 1)})
    print(markdown_table(rows, digits=1))
    for level in args.levels:
        projected = level / 100 * em["gold read"] + (1 - level / 100) * em["none read"]
        print(f"projection, not a measurement: EM {projected:.1f} where a gold passage is read for {level:g}%")


if __name__ == "__main__":
    main()
