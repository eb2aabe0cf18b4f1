"""Question sets, runs and predictions as 🤗 ``datasets.Dataset`` objects, for sharing them on the Hub
(``.push_to_hub``) or as Parquet (``.to_parquet``); ``hf:`` specs read them back."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ifqa.artifacts import Example, QuestionSet
from ifqa.errors import IfqaError
from ifqa.io import read_jsonl


def rows_of(data: QuestionSet | Sequence[Example] | Sequence[Mapping] | str | os.PathLike) -> list[dict]:
    """One dict per question: a question set's ``qid``, ``question``, ``answers``, ``context``; run
    records and predictions as they are (a file is read line by line, each line an object)."""
    if isinstance(data, QuestionSet):
        data = data.examples
    if isinstance(data, (str, os.PathLike)):
        if not Path(data).is_file():
            raise IfqaError("no such file (a run or predictions JSONL)", data)
        rows = []
        for number, record in read_jsonl(data):
            if not isinstance(record, dict):
                raise IfqaError("each line must be a JSON object", data, number)
            rows.append(record)
        return rows
    return [
        {"qid": e.qid, "question": e.question, "answers": list(e.answers), "context": list(e.context)}
        if isinstance(e, Example)
        else dict(e)
        for e in data
    ]


def to_dataset(data) -> Any:
    """A ``datasets.Dataset`` of ``rows_of(data)``; rows whose fields do not share one type are one line."""
    from ifqa.datasets.hub import quiet_datasets  # the Hub's code, for an export alone

    datasets = quiet_datasets()
    rows = rows_of(data)
    try:
        return datasets.Dataset.from_list(rows)
    except (TypeError, ValueError, ImportError) as exc:
        raise IfqaError(f"these rows do not make one table ({' '.join(str(exc).split())[:160]})") from None
