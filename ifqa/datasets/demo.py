"""The embedded demo set (ifqa/demo/, data only): hand-written counterfactual questions and a small
Wikipedia collection, so every command runs offline. A demo, not a benchmark.

The collection ships gzipped; it is unpacked into the ifqa cache on first use (its indexes are
built by ``ifqa.retrieval.specs`` for the ``demo:`` index spec).
"""

from __future__ import annotations

import gzip
import logging
import shutil
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from ifqa.artifacts import Example
from ifqa.datasets.ifqa import load_examples
from ifqa.errors import IfqaError
from ifqa.io import atomic_write, file_sha256
from ifqa.paths import cache_dir

log = logging.getLogger(__name__)

PACKAGE = "ifqa.demo"
PASSAGES = "passages.jsonl.gz"


def packaged_passages() -> Path:
    """The gzipped demo passages inside the installed package."""
    return Path(str(resources.files(PACKAGE) / PASSAGES))


def cached_corpus() -> Path:
    """Where the demo collection is unpacked in the cache (nothing is unpacked here)."""
    return cache_dir() / "demo" / "passages.jsonl"


def corpus_path() -> Path:
    """The demo collection unpacked into the cache (``checked_corpus``)."""
    return checked_corpus()[0]


def checked_corpus() -> tuple[Path, str]:
    """The demo collection unpacked into the cache (atomic), checked on every use against what ifqa
    ships (its stamp holds the shipped file's checksum and the unpacked one's): a newer ifqa's
    passages, or a hand-edited cache copy, are unpacked again rather than trusted. Returns the file
    and its sha256 (what the demo indexes are matched on)."""
    target = cached_corpus()
    stamp = target.with_suffix(".source-sha256")
    expected = f"{file_sha256(packaged_passages())} "
    recorded = stamp.read_text() if stamp.exists() else ""
    if target.exists() and recorded.startswith(expected):
        digest = file_sha256(target)
        if recorded == expected + digest:
            return target, digest
        log.warning("the cached demo collection %s was changed; unpacking it again", target)
    else:
        log.info("unpacking the demo collection to %s", target)
    with gzip.open(packaged_passages(), "rb") as packed, atomic_write(target, "wb") as out:
        shutil.copyfileobj(packed, out)
    digest = file_sha256(target)
    with atomic_write(stamp) as handle:
        handle.write(expected + digest)
    return target, digest


@dataclass(frozen=True)
class DemoSet:
    name: str = "demo"
    splits: tuple[str, ...] = ("train", "dev")
    default_split: str = "dev"

    def load(self, split: str, directory: str | Path | None = None) -> list[Example]:
        if split not in self.splits:
            raise IfqaError(f"the demo set has train and dev splits only, not {split!r}")
        with resources.as_file(resources.files(PACKAGE) / f"questions_{split}.json") as path:
            return load_examples(path)


DEMO = DemoSet()


def load_demo(split: str = "dev") -> list[Example]:
    """The embedded demo questions (written for this project over the demo passages)."""
    return DEMO.load(split)
