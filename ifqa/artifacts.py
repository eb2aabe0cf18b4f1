"""The files passed between stages, typed, with one reader and one writer each (the table of
docs/ARCHITECTURE.md, "Artifacts"). Runs and predictions keep DPR's line format, so what made them,
the question set's identity included, goes into ``<file>.manifest.json`` beside them: question ids
are ``str(idx)`` in every IfQA set, so ids alone cannot tell a demo run from a supervised one."""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, TypedDict

from ifqa.errors import IfqaError
from ifqa.io import nfc, read_jsonl, read_manifest_object, unpaired_surrogate, write_json, write_jsonl
from ifqa.version import __version__


@dataclass(frozen=True)
class Example:
    """One question with its reference answers (aliases) and context: IfQA's gold passages, WIQA's
    procedure steps, CausalQA's source passage. ``meta`` holds what a dataset's scorer breaks
    results down by (WIQA's question type and path length, CausalQA's source dataset)."""

    qid: str
    question: str
    answers: list[str]
    context: list[str] = field(default_factory=list)
    meta: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:  # text enters in NFC, once (io.nfc)
        if isinstance(self.question, str) and not unpaired_surrogate(self.question):
            object.__setattr__(self, "question", nfc(self.question))
        for name in ("answers", "context"):
            values = getattr(self, name)
            if isinstance(values, list) and all(isinstance(v, str) and not unpaired_surrogate(v) for v in values):
                object.__setattr__(self, name, [nfc(v) for v in values])

    def to_json(self) -> dict[str, Any]:
        """The official record layout (``idx`` kept as an int when the id is numeric)."""
        idx: Any = int(self.qid) if self.qid.isdigit() else self.qid
        record = {"idx": idx, "question": self.question, "answers": self.answers, "context": self.context}
        return {**record, "meta": self.meta} if self.meta else record


def question_set_id(examples: Iterable[Example]) -> str:
    """A short hash of the ids and question texts, in order: what makes two question sets the same."""
    digest = hashlib.sha256()
    for example in examples:
        digest.update(json.dumps([example.qid, example.question], ensure_ascii=False).encode("utf-8"))
        digest.update(b"\n")
    return digest.hexdigest()[:16]


@dataclass(frozen=True)
class QuestionSet:
    """Questions plus the name the user gave them (``demo:dev``, ``supervised:dev`` or a file path)
    and their task, which decides how answers are prompted and scored (``qa``, ``wiqa``, ``causalqa``)."""

    name: str
    examples: list[Example]
    task: str = "qa"
    dataset: str | None = None  # the dataset whose format a file named by ``name`` is in (None: IfQA's)
    hub: dict[str, Any] | None = None  # a Hugging Face dataset's id, config, split, revision, fingerprint

    @cached_property
    def identity(self) -> str:
        return question_set_id(self.examples)

    def __repr__(self) -> str:
        """Name, size and task, not every question (a notebook cell shows this)."""
        extra = f", dataset={self.dataset!r}" if self.dataset else ""
        return f"QuestionSet({self.name!r}, {len(self.examples)} questions, task={self.task!r}{extra})"

    def describe(self) -> dict[str, Any]:
        """What manifests record about the questions a file was made for."""
        recorded = {"name": self.name, "id": self.identity, "n": len(self.examples)}
        if self.hub:
            recorded["hub"] = self.hub
        return {**recorded, "dataset": self.dataset} if self.dataset else recorded

    def __len__(self) -> int:
        return len(self.examples)

    def __iter__(self):
        return iter(self.examples)

    def __getitem__(self, item):
        return self.examples[item]


def as_question_set(questions: QuestionSet | Sequence[Example], name: str = "examples") -> QuestionSet:
    """Python callers may pass a plain list of examples; commands always pass a named set."""
    return questions if isinstance(questions, QuestionSet) else QuestionSet(name, list(questions))


class Passage(TypedDict):
    id: str
    title: str
    text: str


class UniqueIds:
    """Duplicate passage ids are an error (a run could not tell the passages apart). Kept as 8-byte
    hashes while a collection is read, so 21M ids cost 170 MB; a collision is confirmed by name, in a
    second reading of the ids (``again``), before it is reported."""

    def __init__(self, where: str | Path):
        import array

        self.where, self._hashes = where, array.array("q")

    def add(self, passage_id: str) -> None:
        self._hashes.append(hash(passage_id))

    def check(self, again: Callable[[], Iterable[str]], source: str | None = None) -> None:
        """Refuse a repeated id; ``again``: the ids once more, in order. ``source``: what the user named
        (an ``hf:`` spec whose rows these are), named with the two rows instead of ``where``."""
        import numpy as np

        values, counts = np.unique(np.frombuffer(self._hashes, dtype=np.int64), return_counts=True)
        suspects = set(values[counts > 1].tolist())
        if not suspects:
            return
        seen: dict[str, int] = {}
        for row, passage_id in enumerate(again()):
            if hash(passage_id) not in suspects:
                continue
            if passage_id in seen:
                if source:
                    raise IfqaError(
                        f"{source}: rows {seen[passage_id]} and {row} have the same id {passage_id!r}; passage ids "
                        "must be unique"
                    )
                raise IfqaError(f"passage id {passage_id!r} occurs more than once; ids must be unique", self.where)
            seen[passage_id] = row


#: The first line of a DPR TSV collection (``id\ttext\ttitle``), the other passage file layout.
TSV_HEADER = "id\ttext\ttitle"
#: what a DPR TSV row that does not split into its 3 fields is told
TSV_FIELDS_HINT = "a row needs exactly 3 tab-separated fields, id, text and title: a tab inside a title?"


class RunRecord(TypedDict):
    """One question's line of a run file: its id, text and answers, and the ranked passages
    (``ctxs``: each a ``retrieval.hits.Hit`` in its run-file form, ``Hit.as_context()``, with the
    scorer's ``has_answer`` and ``gold`` flags), in DPR/FiD's retrieval schema."""

    qid: str
    question: str
    answers: list[str]
    ctxs: list[dict]


class Prediction(TypedDict, total=False):
    qid: str
    prediction: str
    raw: str
    reasoning: str


def manifest_path(path: str | Path) -> Path:
    return Path(f"{path}.manifest.json")


def read_manifest(path: str | Path) -> dict[str, Any] | None:
    """The manifest beside a run or predictions file; None for files made by other tools."""
    sidecar = manifest_path(path)
    if not sidecar.exists():
        return None
    return read_manifest_object(sidecar, "; fix or delete it")


def recorded_questions(path: str | Path) -> dict[str, Any] | None:
    """``{"name", "id", "n"}`` of the question set a file was made for, when its manifest says."""
    manifest = read_manifest(path)
    questions = (manifest or {}).get("questions")
    return questions if isinstance(questions, dict) and "id" in questions else None


def check_questions(path: str | Path, questions: QuestionSet, records: Iterable[dict] | None = None) -> None:
    """Refuse a file made for another question set (one line naming both sets): by its manifest, or,
    where no manifest records a set, by its records' own question texts (ids collide across sets;
    ``records``: the file's, where the caller has read them)."""
    recorded = recorded_questions(path)
    if recorded is None:
        check_records_ask(_asked(path) if records is None else records, questions, path)
    elif recorded["id"] != questions.identity:
        raise IfqaError(
            f"made for the question set {recorded.get('name')!r} ({recorded.get('n')} questions, id "
            f"{recorded['id']}), not {questions.name!r} ({len(questions)} questions, id "
            f"{questions.identity}); name the right questions or file",
            path,
        )


def _asked(path: str | Path) -> Iterable[dict]:
    """The records of a file that say which question they answer (malformed lines are left to the
    file's own reader, which names them)."""
    if not Path(path).is_file():
        return
    for _, record in read_jsonl(path):
        if isinstance(record, dict) and "qid" in record and isinstance(record.get("question"), str):
            yield record


def check_records_ask(records: Iterable[dict], questions: QuestionSet, where: str | Path | None = None) -> None:
    """Records of another set whose qids collide are refused: a record's own question text must be
    the one ``questions`` asks under its qid (records without a text, or of a qid the set lacks, are
    the caller's to judge)."""
    known = {example.qid: example.question for example in questions.examples}
    for record in records:
        asked, qid = record.get("question"), str(record.get("qid"))
        if isinstance(asked, str) and qid in known and nfc(asked) != known[qid]:
            raise IfqaError(
                f"the record of qid {qid!r} asks {asked[:60]!r}, not {questions.name}'s question; "
                "name the questions it was made for",
                where,
            )


def write_manifest(path: str | Path, questions: QuestionSet | None, **fields: Any) -> None:
    """``<path>.manifest.json``: the ifqa version, the question set, then the stage's own fields."""
    manifest: dict[str, Any] = {"ifqa": __version__}
    if questions is not None:
        manifest["questions"] = questions.describe()
    manifest.update(fields)
    write_json(manifest_path(path), manifest)


# --- runs --------------------------------------------------------------------------------------


def is_id(value: Any) -> bool:
    """Question and passage ids are non-empty strings or integers (never objects, lists or booleans)."""
    return not isinstance(value, bool) and isinstance(value, (str, int)) and str(value).strip() != ""


def _check_id(value: Any, field: str, path: str | Path, number: int) -> None:
    if not is_id(value):
        raise IfqaError(f"{field} must be a non-empty string or an integer, found {value!r}"[:200], path, number)


def read_run(path: str | Path) -> list[RunRecord]:
    """All records of a run file, checked against the run schema (ids, a string text and a finite
    score for each passage); a file of no records is an error, not an empty run."""
    records: list[RunRecord] = []
    seen: set[str] = set()
    for number, record in read_jsonl(path):
        if not isinstance(record, dict):
            raise IfqaError(f"expected an object, found {type(record).__name__}", path, number)
        if "qid" not in record or not isinstance(record.get("ctxs"), list):
            raise IfqaError("each line needs 'qid' and a 'ctxs' list (is this a run file?)", path, number)
        _check_id(record["qid"], "'qid'", path, number)
        qid = str(record["qid"])
        if qid in seen:
            raise IfqaError(f"duplicate qid {qid!r}", path, number)
        seen.add(qid)
        for rank, ctx in enumerate(record["ctxs"], start=1):
            if not isinstance(ctx, dict) or not isinstance(ctx.get("text", ""), str) or "id" not in ctx:
                raise IfqaError(f"ctx {rank} needs an 'id' and a string 'text'", path, number)
            _check_id(ctx["id"], f"ctx {rank}: 'id'", path, number)
            score = ctx.get("score", 0.0)
            if score is not None and (
                isinstance(score, bool) or not isinstance(score, (int, float)) or not math.isfinite(score)
            ):
                raise IfqaError(f"ctx {rank}: 'score' must be a finite number, found {score!r}"[:200], path, number)
        record["qid"] = qid
        records.append(record)  # type: ignore[arg-type]
    if not records:
        raise IfqaError("holds no run records", path)
    return records


def write_run(path: str | Path, records: Iterable[RunRecord]) -> int:
    """Write run lines atomically (the manifest is the caller's: it knows how the run was made)."""
    return write_jsonl(path, records)


# --- predictions -------------------------------------------------------------------------------


def read_predictions(path: str | Path, convert: Callable[[str], str] | None = None) -> dict[str, str]:
    """``qid -> prediction`` from a predictions JSONL; a missing field or repeated qid is an error.
    ``convert``: the task's form of a prediction (WIQA's labels), a ``ValueError`` for one it refuses."""
    predictions: dict[str, str] = {}
    for number, record in read_jsonl(path):
        if not isinstance(record, dict):
            raise IfqaError(f"expected an object, found {type(record).__name__}", path, number)
        if "qid" not in record or "prediction" not in record:
            raise IfqaError("each line needs 'qid' and 'prediction'", path, number)
        _check_id(record["qid"], "'qid'", path, number)
        qid, prediction = str(record["qid"]), record["prediction"]
        if not isinstance(prediction, str):
            raise IfqaError(f"'prediction' must be a string, found {type(prediction).__name__}", path, number)
        if convert is not None:
            try:
                prediction = convert(prediction)
            except ValueError as exc:
                raise IfqaError(str(exc), path, number) from None
        if qid in predictions:
            raise IfqaError(f"duplicate qid {qid!r}", path, number)
        predictions[qid] = prediction
    if not predictions:
        raise IfqaError("holds no predictions", path)
    return predictions


def write_predictions(path: str | Path, records: Sequence[Prediction]) -> int:
    return write_jsonl(path, records)
