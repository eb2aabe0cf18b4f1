"""Reading and validating the artifacts passed between stages: predictions and retrieval runs.

Run records follow DPR/FiD's retrieval JSON, one question per line:
``{"qid", "question", "answers", "ctxs": [{"id", "title", "text", "score", "has_answer", "gold"}]}``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ifqa.errors import IfqaError
from ifqa.io import read_jsonl


def read_predictions(path: str | Path) -> dict[str, str]:
    """``qid -> prediction`` from a predictions JSONL; a missing field or repeated qid is an error."""
    predictions: dict[str, str] = {}
    for number, record in read_jsonl(path):
        if not isinstance(record, dict):
            raise IfqaError(f"expected an object, found {type(record).__name__}", path, number)
        if "qid" not in record or "prediction" not in record:
            raise IfqaError("each line needs 'qid' and 'prediction'", path, number)
        qid, prediction = str(record["qid"]), record["prediction"]
        if not isinstance(prediction, str):
            raise IfqaError(f"'prediction' must be a string, found {type(prediction).__name__}", path, number)
        if qid in predictions:
            raise IfqaError(f"duplicate qid {qid!r}", path, number)
        predictions[qid] = prediction
    return predictions


def read_run(path: str | Path) -> list[dict[str, Any]]:
    """All records of a run file, checked against the run schema (passages need at least text)."""
    records = []
    seen: set[str] = set()
    for number, record in read_jsonl(path):
        if not isinstance(record, dict):
            raise IfqaError(f"expected an object, found {type(record).__name__}", path, number)
        if "qid" not in record or not isinstance(record.get("ctxs"), list):
            raise IfqaError("each line needs 'qid' and a 'ctxs' list", path, number)
        qid = str(record["qid"])
        if qid in seen:
            raise IfqaError(f"duplicate qid {qid!r}", path, number)
        seen.add(qid)
        for rank, ctx in enumerate(record["ctxs"], start=1):
            if not isinstance(ctx, dict) or not isinstance(ctx.get("text", ""), str) or "id" not in ctx:
                raise IfqaError(f"ctx {rank} needs an 'id' and a string 'text'", path, number)
        record["qid"] = qid
        records.append(record)
    return records
