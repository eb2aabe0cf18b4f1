"""The embedded demo set (ifqa/demo/, data only): hand-written counterfactual questions and a small
Wikipedia collection, so every command runs offline. A demo, not a benchmark.

The collection ships gzipped; it is unpacked into the ifqa cache on first use (its indexes are
built by ``ifqa.retrieval.specs`` for the ``demo:`` index spec).
"""

from __future__ import annotations

import gzip
import hashlib
import logging
import shutil
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from ifqa.artifacts import Example
from ifqa.errors import IfqaError
from ifqa.io import atomic_write
from ifqa.paths import cache_dir

log = logging.getLogger(__name__)

PACKAGE = "ifqa.demo"
PASSAGES = "passages.jsonl.gz"


def packaged_passages() -> Path:
    """The gzipped demo passages inside the installed package."""
    return Path(str(resources.files(PACKAGE) / PASSAGES))


def corpus_path() -> Path:
    """The demo collection unpacked into the cache (atomic), checked on every use against what ifqa
    ships (its stamp holds the shipped file's checksum and the unpacked one's): a newer ifqa's
    passages, or a hand-edited cache copy, are unpacked again rather than trusted."""
    target = cache_dir() / "demo" / "passages.jsonl"
    source = packaged_passages()
    stamp = target.with_suffix(".source-sha256")
    expected = f"{hashlib.sha256(source.read_bytes()).hexdigest()} "
    recorded = stamp.read_text() if stamp.exists() else ""
    if target.exists() and recorded.startswith(expected) and recorded == expected + _sha256(target):
        return target
    if target.exists() and recorded.startswith(expected):
        log.warning("the cached demo collection %s was changed; unpacking it again", target)
    else:
        log.info("unpacking the demo collection to %s", target)
    with gzip.open(source, "rb") as packed, atomic_write(target, "wb") as out:
        shutil.copyfileobj(packed, out)
    with atomic_write(stamp) as handle:
        handle.write(expected + _sha256(target))
    return target


def _sha256(path: Path) -> str:
    with open(path, "rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()


@dataclass(frozen=True)
class DemoSet:
    name: str = "demo"
    splits: tuple[str, ...] = ("train", "dev")
    default_split: str = "dev"

    def load(self, split: str, directory: str | Path | None = None) -> list[Example]:
        from ifqa.datasets.ifqa import load_examples

        if split not in self.splits:
            raise IfqaError(f"the demo set has train and dev splits only, not {split!r}")
        with resources.as_file(resources.files(PACKAGE) / f"questions_{split}.json") as path:
            return load_examples(path)


DEMO = DemoSet()


def load_demo(split: str = "dev") -> list[Example]:
    """The embedded demo questions (written for this project over the demo passages)."""
    return DEMO.load(split)
