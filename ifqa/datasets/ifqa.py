"""IfQA: the official splits (download, cache, validation) and the IfQA file format for any question file.

The official release is a JSON list per split of ``{"idx", "question", "answers", "context"}``
(``context`` = the gold Wikipedia passages). A question's id everywhere in ifqa is ``str(idx)``.
"""

from __future__ import annotations

import json
import logging
import os
import urllib.error
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ifqa.artifacts import Example
from ifqa.errors import IfqaError
from ifqa.io import SURROGATE_PROBLEM, atomic_write, read_json, read_jsonl, unpaired_surrogate
from ifqa.paths import cache_dir

log = logging.getLogger(__name__)

#: Setting name on the command line -> folder name in the official release.
SETTINGS = {"supervised": "full_split", "few-shot": "few_split"}
SPLITS = ("train", "dev", "test")
DEFAULT_BASE_URL = "https://raw.githubusercontent.com/wyu97/IfQA/main/dataset"


def data_dir(override: str | Path | None = None) -> Path:
    """The IfQA cache: ``override``, else ``$IFQA_DATA_DIR``, else ``<ifqa cache>/data``."""
    return Path(override or os.environ.get("IFQA_DATA_DIR") or cache_dir() / "data")


def split_path(setting: str, split: str, directory: str | Path | None = None) -> Path:
    """Where a split lives in the cache (the release's own layout: ``full_split/dev.json``)."""
    if setting not in SETTINGS:
        raise IfqaError(f"unknown setting {setting!r}; choose from {', '.join(SETTINGS)}")
    if split not in SPLITS:
        raise IfqaError(f"unknown split {split!r}; choose from {', '.join(SPLITS)}")
    return data_dir(directory) / SETTINGS[setting] / f"{split}.json"


def download(
    settings: list[str] | None = None,
    splits: list[str] | None = None,
    directory: str | Path | None = None,
    base_url: str | None = None,
    force: bool = False,
) -> list[Path]:
    """Fetch official splits into the cache; each file is validated before it is moved into place."""
    from ifqa.datasets.download import join_url, open_url  # the network's code, for this command alone

    base = base_url or os.environ.get("IFQA_BASE_URL") or DEFAULT_BASE_URL
    fetched = []
    for setting in settings or list(SETTINGS):
        for split in splits or list(SPLITS):
            target = split_path(setting, split, directory)
            if target.exists() and not force:
                log.info("%s already cached", target)
                fetched.append(target)
                continue
            url = join_url(base, SETTINGS[setting], f"{split}.json")
            log.info("downloading %s", url)
            try:
                with open_url(url) as response:
                    payload = response.read()
            except (urllib.error.URLError, OSError) as exc:
                raise IfqaError(f"download failed: {exc}", url) from None
            try:
                parsed = json.loads(payload)
            except (json.JSONDecodeError, UnicodeDecodeError) as exc:
                raise IfqaError(f"downloaded file is not JSON ({exc})", url) from None
            parse_examples(parsed, url)
            with atomic_write(target, "wb") as out:
                out.write(payload)
            fetched.append(target)
    return fetched


def load_split(setting: str, split: str, directory: str | Path | None = None) -> list[Example]:
    """Load an official split from the cache, downloading it first if it is missing."""
    path = split_path(setting, split, directory)
    if not path.exists():
        download([setting], [split], directory)
    return load_examples(path)


def load_examples(path: str | Path, answers: bool = True) -> list[Example]:
    """Load and validate a file in the IfQA format (a JSON list, or JSON Lines with one example a line).

    Every problem is reported as one line naming the file, the example and the field.
    """
    path = Path(path)
    if path.suffix == ".jsonl" or path.name.endswith(".jsonl.gz"):
        examples = parse_examples(read_jsonl(path), str(path), unit="line", answers=answers)
    else:
        examples = parse_examples(read_json(path), str(path), answers=answers)
    if not examples:
        raise IfqaError("holds no questions", path)
    return examples


def parse_examples(data: Any, name: str, unit: str = "example", answers: bool = True) -> list[Example]:
    """Validate parsed records: a JSON list, or ``(line, record)`` pairs when ``unit`` is "line"
    (``answers`` False: questions without answers are taken, for what needs none, like classifying)."""
    if unit == "line":
        items = [(f"line {number}", record) for number, record in data]
    elif isinstance(data, list):
        items = [(f"example {number}", record) for number, record in enumerate(data)]
    else:
        raise IfqaError(f"expected a JSON list of examples, found {type(data).__name__}", name)
    examples = [_parse_example(record, name, where, answers) for where, record in items]
    seen: dict[str, str] = {}
    for (where, _), example in zip(items, examples):
        if example.qid in seen:
            raise IfqaError(f"{where}: duplicate idx {example.qid!r} (first at {seen[example.qid]})", name)
        seen[example.qid] = where
    return examples


def _parse_example(record: Any, name: str, where: str, need_answers: bool = True) -> Example:
    def fail(problem: str) -> IfqaError:
        return IfqaError(f"{where}: {problem}", name)

    if not isinstance(record, dict):
        raise fail(f"expected an object, found {type(record).__name__}")
    for key in ("idx", "question", "answers") if need_answers else ("idx", "question"):
        if key not in record:
            raise fail(f"missing field {key!r}")
    idx = record["idx"]
    if isinstance(idx, bool) or not isinstance(idx, (int, str)) or str(idx).strip() == "":
        raise fail(f"'idx' must be an integer or a non-empty string, found {idx!r}")
    question = record["question"]
    if not isinstance(question, str) or not question.strip():
        raise fail("'question' must be a non-empty string")
    answers = record.get("answers")
    if need_answers or answers not in (None, []):  # what needs no answers still refuses malformed ones
        if not isinstance(answers, list) or not answers:
            raise fail("'answers' must be a non-empty list of strings")
        if not all(isinstance(answer, str) and answer.strip() for answer in answers):
            raise fail("'answers' must hold non-empty strings only")
    answers = answers or []
    context = record.get("context", [])
    if isinstance(context, str):
        context = [context]
    if not isinstance(context, list) or not all(isinstance(passage, str) for passage in context):
        raise fail("'context' must be a list of strings")
    if unpaired_surrogate(question, *answers, *context):
        raise fail(SURROGATE_PROBLEM)
    return Example(qid=str(idx), question=question, answers=list(answers), context=list(context))


@dataclass(frozen=True)
class IfQASetting:
    """One setting of the release (supervised = ``full_split``, few-shot = ``few_split``), for the registry."""

    name: str
    splits: tuple[str, ...] = SPLITS
    default_split: str = "dev"

    def load(self, split: str, directory: str | Path | None = None) -> list[Example]:
        return load_split(self.name, split, directory)


SUPERVISED = IfQASetting("supervised")
FEW_SHOT = IfQASetting("few-shot")
