"""Run formats in and out: TREC run files (pyserini, Anserini, trec_eval) and DPR's retrieval JSON.

TREC lines are ``qid Q0 docid rank score tag``; turning them into a run needs the questions (for
question and answers) and the collection (for passage text). DPR's result file is a JSON list of
``{"question", "answers", "ctxs"}`` without ids: questions are matched by text to the question set.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from ifqa.artifacts import QuestionSet, write_manifest, write_run
from ifqa.errors import IfqaError
from ifqa.eval.passages import run_record
from ifqa.io import atomic_write, read_json
from ifqa.retrieval.store import iter_corpus


def trec_field(value, what: str) -> str:
    """A TREC run's column: whitespace separates the columns, so an id holding some is refused (one
    line naming it; the file being written is dropped whole), never written as a line of 7 fields."""
    text = str(value)
    if not text or any(c.isspace() for c in text):
        raise IfqaError(
            f"{what} {text!r} is empty or holds whitespace, which TREC files cannot carry; use --to run or dpr"
        )
    return text


def run_to_trec(records: Sequence[dict], output: str | Path, tag: str = "ifqa") -> None:
    tag = trec_field(tag, "the tag")
    with atomic_write(output) as handle:  # a refused id leaves no file
        for record in records:
            qid = trec_field(record["qid"], "question id")
            for rank, ctx in enumerate(record["ctxs"], start=1):
                passage = trec_field(ctx["id"], "passage id")
                handle.write(f"{qid} Q0 {passage} {rank} {float(ctx.get('score', 0.0)):.6f} {tag}\n")


def run_to_qrels(records: Sequence[dict], output: str | Path) -> int:
    """TREC qrels (``qid 0 docid 1``) of the passages the run flags as gold; returns how many.

    Gold passages are matched by text (``ifqa.eval.passages.GoldMatcher``), so the qrels cover the
    passages this run retrieved: trec_eval's recall with them is recall within the run's depth.
    """
    count = 0
    with atomic_write(output) as handle:  # a refused id leaves no file
        for record in records:
            for ctx in record["ctxs"]:
                if ctx.get("gold"):
                    qid, passage = trec_field(record["qid"], "question id"), trec_field(ctx["id"], "passage id")
                    handle.write(f"{qid} 0 {passage} 1\n")
                    count += 1
    return count


def run_to_dpr(records: Sequence[dict], output: str | Path) -> None:
    """DPR/FiD JSON list; ``id`` (FiD's key) and ``qid`` both carry the question id."""
    payload = [
        {"id": r["qid"], "qid": r["qid"], "question": r["question"], "answers": r["answers"], "ctxs": r["ctxs"]}
        for r in records
    ]
    with atomic_write(output) as handle:
        json.dump(payload, handle, ensure_ascii=False)


def trec_to_run(trec: str | Path, questions: QuestionSet, corpus: str | Path, output: str | Path) -> int:
    examples = questions.examples
    by_qid = {e.qid: e for e in examples}
    ranked: dict[str, list[tuple[int, str, float]]] = {}
    with open(trec, encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            parts = line.split()
            if not parts:
                continue
            if len(parts) != 6:
                raise IfqaError("a TREC run line has 6 fields: qid Q0 docid rank score tag", trec, number)
            qid, _, docid, rank, score = parts[:5]
            if qid not in by_qid:
                raise IfqaError(f"qid {qid!r} is not in the question set", trec, number)
            try:
                ranked.setdefault(qid, []).append((int(rank), docid, float(score)))
            except ValueError:
                raise IfqaError("rank must be an integer and score a number", trec, number) from None
    wanted = {docid for hits in ranked.values() for _, docid, _ in hits}
    texts = {p["id"]: p for _, p in iter_corpus(corpus) if p["id"] in wanted}
    missing = wanted - texts.keys()
    if missing:
        raise IfqaError(f"{len(missing)} retrieved ids are not in the collection (e.g. {sorted(missing)[0]!r})", corpus)
    records = []
    for example in examples:
        hits = sorted(ranked.get(example.qid, []))
        ctxs = [{**texts[docid], "score": score} for _, docid, score in hits]
        records.append(run_record(example, ctxs))
    count = write_run(output, records)
    write_manifest(output, questions, converted_from={"format": "trec", "path": str(trec)}, n=count)
    return count


def dpr_to_run(dpr: str | Path, questions: QuestionSet, output: str | Path) -> int:
    examples = questions.examples
    data = read_json(dpr)
    if not isinstance(data, list):
        raise IfqaError("expected DPR's JSON list of results", dpr)
    by_question = {e.question.strip(): e for e in examples}
    records = []
    for number, item in enumerate(data):
        if not isinstance(item, dict) or "question" not in item or not isinstance(item.get("ctxs"), list):
            raise IfqaError(f"result {number}: needs 'question' and a 'ctxs' list", dpr)
        example = by_question.get(str(item["question"]).strip())
        if example is None:
            raise IfqaError(f"result {number}: question not in the question set: {item['question'][:60]!r}", dpr)
        ctxs = [
            {
                "id": str(c.get("id")),
                "title": c.get("title", ""),
                "text": c.get("text", ""),
                "score": float(c.get("score", 0.0)),
            }
            for c in item["ctxs"]
        ]
        records.append(run_record(example, ctxs))
    count = write_run(output, records)
    write_manifest(output, questions, converted_from={"format": "dpr", "path": str(dpr)}, n=count)
    return count
