"""WIQA v2 without explanations (Tandon et al., EMNLP 2019): "what if" questions over procedures.

The AllenAI release is a zip of ``train.jsonl``, ``dev.jsonl`` and ``test.jsonl`` (29,808 / 6,894 /
3,003 questions), one question a line::

    {"question": {"stem": "suppose ... how will it affect MORE ...?", "para_steps": [...],
                  "answer_label": "more|less|no_effect", "answer_label_as_choice": "A", "choices": [...]},
     "metadata": {"ques_id": ..., "graph_id": ..., "para_id": ..., "question_type": ..., "path_len": ...}}

It becomes an ``Example`` whose answer is the label, whose ``context`` is the procedure's steps
(WIQA's standard setting gives the paragraph), and whose ``meta`` keeps the question type and path
length the scorer breaks accuracy down by.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from ifqa.artifacts import Example
from ifqa.datasets.download import install, installed
from ifqa.datasets.ifqa import data_dir
from ifqa.errors import IfqaError
from ifqa.eval.wiqa import LABELS
from ifqa.io import read_jsonl

DEFAULT_URL = (
    "https://public-aristo-processes.s3-us-west-2.amazonaws.com/wiqa_dataset_no_explanation_v2/"
    "wiqa-dataset-v2-october-2019.zip"
)
SPLITS = ("train", "dev", "test")


def cache_folder(directory: str | Path | None = None) -> Path:
    return data_dir(directory) / "wiqa"


def download(
    directory: str | Path | None = None, url: str | None = None, force: bool = False, progress: bool = True
) -> list[Path]:
    """Fetch the release into ``<data dir>/wiqa/`` (``$IFQA_WIQA_URL`` overrides the location);
    each split is validated before it is kept."""
    folder = cache_folder(directory)
    targets = [folder / f"{split}.jsonl" for split in SPLITS]
    if installed(folder) and not force:  # the whole release, as its record says
        return targets
    url = url or os.environ.get("IFQA_WIQA_URL") or DEFAULT_URL
    names = {f"{split}.jsonl" for split in SPLITS}
    install(url, folder, lambda member: Path(member).name if Path(member).name in names else None, load_file, progress)
    missing = [t.name for t in targets if not t.exists()]
    if missing:
        raise IfqaError(f"the archive lacks {', '.join(missing)}", url)
    return targets


def load_file(path: str | Path) -> list[Example]:
    """Read and validate a WIQA JSONL file; every problem is one line naming the file and line."""
    examples, seen = [], {}
    for number, record in read_jsonl(path):
        example = parse_record(record, path, number)
        if example.qid in seen:
            raise IfqaError(f"duplicate question id {example.qid!r} (first on line {seen[example.qid]})", path, number)
        seen[example.qid] = number
        examples.append(example)
    if not examples:
        raise IfqaError("no questions", path)
    return examples


def parse_record(record: Any, path: str | Path, number: int) -> Example:
    def fail(problem: str) -> IfqaError:
        return IfqaError(problem, path, number)

    if not isinstance(record, dict) or not isinstance(record.get("question"), dict):
        raise fail("expected an object with a 'question' object")
    question, metadata = record["question"], record.get("metadata") or {}
    stem = question.get("stem")
    if not isinstance(stem, str) or not stem.strip():
        raise fail("missing 'question.stem'")
    if "answer_label" not in question:
        raise fail("missing 'question.answer_label'")
    label = question["answer_label"]
    if label not in LABELS:
        raise fail(f"unknown answer_label {label!r} (expected {', '.join(LABELS)})")
    steps = question.get("para_steps", [])
    if not isinstance(steps, list) or not all(isinstance(s, str) for s in steps):
        raise fail("'question.para_steps' must be a list of strings")
    qid = metadata.get("ques_id") if isinstance(metadata, dict) else None
    if not isinstance(qid, str) or not qid:
        raise fail("missing 'metadata.ques_id'")
    path_length = metadata.get("path_len")
    meta = {
        "question_type": metadata.get("question_type", ""),
        "path_length": "unknown" if path_length is None else path_length,
        "paragraph": metadata.get("para_id"),
    }
    return Example(qid, stem.strip(), [label], [s.strip() for s in steps if s.strip()], meta)


@dataclass(frozen=True)
class WiqaSet:
    """The official release (downloaded on first use), or the demo files shipped in the package."""

    name: str = "wiqa"
    splits: tuple[str, ...] = SPLITS
    default_split: str = "dev"
    task: str = "wiqa"
    demo: bool = False

    def load(self, split: str, directory: str | Path | None = None) -> list[Example]:
        if split not in self.splits:
            raise IfqaError(f"{self.name} has {', '.join(self.splits)} splits, not {split!r}")
        if self.demo:
            with resources.as_file(resources.files("ifqa.demo") / "wiqa" / f"{split}.jsonl") as path:
                return load_file(path)
        path = cache_folder(directory) / f"{split}.jsonl"
        if not path.exists():
            download(directory)
        return load_file(path)

    load_file = staticmethod(load_file)


WIQA = WiqaSet()
WIQA_DEMO = WiqaSet(name="wiqa-demo", splits=("train", "dev"), demo=True)
