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
    """The demo collection unpacked into the cache (done once; atomic)."""
    target = cache_dir() / "demo" / "passages.jsonl"
    source = packaged_passages()
    stamp = target.with_suffix(".source-sha256")  # a newer ifqa may ship other passages of the same size
    digest = hashlib.sha256(source.read_bytes()).hexdigest()
    if not target.exists() or not stamp.exists() or stamp.read_text() != digest:
        log.info("unpacking the demo collection to %s", target)
        with gzip.open(source, "rb") as packed, atomic_write(target, "wb") as out:
            shutil.copyfileobj(packed, out)
        stamp.write_text(digest)
    return target


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
