"""Webis-CausalQA-22 (Bondarenko et al., COLING 2022): causal questions from ten QA datasets.

The Webis release (Zenodo record 7186761) is a zip holding, per source dataset, CSV files under
``input/original-splits/<source>_{train,valid}_original_split.csv`` and
``input/random-splits/<source>_{train,valid}_random_split.csv``. A row has the question
(``question_processed``, else ``question``), its answers (``answer``: several separated by tabs,
else ``answer_processed``), an optional context passage (``context_processed``, else ``context``)
and an ``id``. ELI5's files carry ids only (ELI5 may not be redistributed): they are skipped with
a warning when the whole release is loaded; rebuild their text from ELI5 yourself to use them.

Our ``dev`` split is the release's ``valid``; the source dataset of each question is in ``meta``,
so scores break down by source as the paper's Table 4 does.
"""

from __future__ import annotations

import csv
import io
import logging
import os
import re
import sys
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from ifqa.artifacts import Example
from ifqa.datasets.download import install, installed
from ifqa.datasets.ifqa import data_dir
from ifqa.errors import IfqaError

log = logging.getLogger(__name__)

DEFAULT_URL = "https://zenodo.org/record/7186761/files/Webis-CausalQA-22-v-1.0.zip"
SPLIT_FILES = {"train": "train", "dev": "valid"}
QUESTION_COLUMNS = ("question_processed", "question")
ANSWER_COLUMNS = ("answer", "answer_processed")
CONTEXT_COLUMNS = ("context_processed", "context")
_FILE = re.compile(r"(?P<source>[a-z0-9]+)_(?P<split>train|valid)_(?P<kind>original|random)_split\.csv$")


def cache_folder(directory: str | Path | None = None) -> Path:
    return data_dir(directory) / "causalqa"


def download(
    directory: str | Path | None = None, url: str | None = None, force: bool = False, progress: bool = True
) -> list[Path]:
    """Fetch the release's CSV files into ``<data dir>/causalqa/{original,random}-splits/``
    (``$IFQA_CAUSALQA_URL`` overrides the location); each is validated before it is kept."""
    folder = cache_folder(directory)
    existing = installed(folder)  # the whole release, as its record says (not the files a killed run left)
    if existing and not force:
        return sorted(existing)
    url = url or os.environ.get("IFQA_CAUSALQA_URL") or DEFAULT_URL

    def place(member: str) -> str | None:
        match = _FILE.search(member)
        return f"{match['kind']}-splits/{Path(member).name}" if match and "/input/" in f"/{member}" else None

    def check(path: Path) -> None:
        if not _ids_only(path):
            load_file(path)

    install(url, folder, place, check, progress)
    return sorted(folder.glob("*-splits/*.csv"))


def _decode(path: Path) -> str:
    data = path.read_bytes()
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise IfqaError(f"not UTF-8 text (byte {exc.start}: {exc.reason})", path, line) from None


def _header(path: Path) -> list[str]:
    with path.open("rb") as handle:
        first = handle.readline()
    try:
        return next(csv.reader([first.decode("utf-8-sig")]), [])
    except UnicodeDecodeError as exc:
        raise IfqaError(f"not UTF-8 text (byte {exc.start}: {exc.reason})", path, 1) from None


def _ids_only(path: Path) -> bool:
    return not any(column in _header(path) for column in QUESTION_COLUMNS)


def source_of(path: str | Path) -> str:
    match = _FILE.search(Path(path).name)
    return match["source"] if match else Path(path).stem


def load_file(path: str | Path) -> list[Example]:
    """Read one CausalQA CSV; a missing column or bad encoding is one line naming the file (and line)."""
    path = Path(path)
    if path.suffix != ".csv":
        raise IfqaError("expected a CausalQA .csv file", path)
    csv.field_size_limit(sys.maxsize)  # contexts can be long
    reader = csv.DictReader(io.StringIO(_decode(path), newline=""))
    columns = reader.fieldnames or []

    def pick(options: tuple[str, ...], what: str, required: bool = True) -> str | None:
        found = next((c for c in options if c in columns), None)
        if found is None and required:
            raise IfqaError(
                f"missing column {' or '.join(options)} (the {what}); found: {', '.join(columns) or 'no header'}",
                path,
                1,
            )
        return found

    question_col, answer_col = pick(QUESTION_COLUMNS, "question"), pick(ANSWER_COLUMNS, "answers")
    context_col = pick(CONTEXT_COLUMNS, "context", required=False)
    source = source_of(path)
    examples, seen, skipped = [], {}, 0
    try:
        for row in reader:
            line = reader.line_num
            if None in row:
                raise IfqaError(f"{len(columns) + len(row[None])} fields, the header has {len(columns)}", path, line)
            question = (row.get(question_col) or "").strip()
            answers = [a.strip() for a in (row.get(answer_col) or "").split("\t") if a.strip()]
            if not question or not answers:
                skipped += 1
                continue
            qid = f"{source}:{(row.get('id') or '').strip() or line}"
            if qid in seen:
                raise IfqaError(f"duplicate id {qid!r} (first on line {seen[qid]})", path, line)
            seen[qid] = line
            context = (row.get(context_col) or "").strip() if context_col else ""
            examples.append(Example(qid, question, answers, [context] if context else [], {"source": source}))
    except csv.Error as exc:
        raise IfqaError(f"malformed CSV ({exc})", path, reader.line_num) from None
    if skipped:
        log.warning("%s: skipped %d rows without a question or an answer", path, skipped)
    if not examples:
        raise IfqaError("no questions with answers", path)
    return examples


def load_folder(folder: Path, split: str, kind: str) -> list[Example]:
    examples = []
    for path in sorted(folder.glob(f"{kind}-splits/*_{SPLIT_FILES[split]}_{kind}_split.csv")):
        if _ids_only(path):
            log.warning(
                "%s: ids only (%s may not be redistributed); rebuild its text to use it", path.name, source_of(path)
            )
            continue
        examples.extend(load_file(path))
    return examples


@dataclass(frozen=True)
class CausalQASet:
    """One split kind of the release (``original`` or ``random``), or the demo files in the package."""

    name: str = "causalqa"
    kind: str = "original"
    splits: tuple[str, ...] = ("train", "dev")
    default_split: str = "dev"
    task: str = "causalqa"
    demo: bool = False

    def load(self, split: str, directory: str | Path | None = None) -> list[Example]:
        if split not in self.splits:
            raise IfqaError(
                f"{self.name} has {', '.join(self.splits)} splits (dev is the release's valid), not {split!r}"
            )
        if self.demo:
            with resources.as_file(resources.files("ifqa.demo") / "causalqa") as folder:
                return load_folder(Path(folder), split, self.kind)
        folder = cache_folder(directory)
        if installed(folder) is None:  # not installed whole (a download killed between its files): again
            download(directory)
        examples = load_folder(folder, split, self.kind)
        if not examples:
            raise IfqaError(f"no {self.kind}-split {split} files with questions", folder)
        return examples

    load_file = staticmethod(load_file)


CAUSALQA = CausalQASet()
CAUSALQA_RANDOM = CausalQASet(name="causalqa-random", kind="random")
CAUSALQA_DEMO = CausalQASet(name="causalqa-demo", demo=True)
