"""What every index folder shares: a manifest, the passage offsets, atomic creation, and opening.

An index folder holds ``manifest.json`` (engine, parameters, collection path and checksum, passage
count, build time, size), ``offsets.npy`` (where each passage starts in the collection file) and the
engine's own files. It is built in a temporary folder and renamed into place when complete.
Opening an index by its spec (a folder, ``demo:NAME``, ``prebuilt:NAME``) is ``ifqa.retrieval.specs``.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any, Iterator, Protocol, Sequence

import numpy as np

from ifqa import __version__
from ifqa.errors import IfqaError
from ifqa.io import write_json
from ifqa.retrieval.store import PassageStore

MANIFEST = "manifest.json"
OFFSETS = "offsets.npy"

Hits = list[tuple[int, float]]  # (passage position, score), best first


class Retriever(Protocol):
    """The one interface every backend offers."""

    name: str
    manifest: dict
    passages: PassageStore

    def search(self, queries: Sequence[str], k: int, threads: int = 1) -> list[Hits]:
        """Top-``k`` passages for each query."""


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 22), b""):
            digest.update(block)
    return digest.hexdigest()


def corpus_record(corpus: Path) -> dict[str, Any]:
    """Identify a collection: its manifest's checksum when the builder left one, else computed."""
    corpus = Path(corpus).resolve()
    built = Path(f"{corpus}.manifest.json")
    sha = None
    if built.exists():
        with contextlib.suppress(ValueError, OSError):
            sha = json.loads(built.read_text()).get("sha256")
    return {"path": str(corpus), "bytes": corpus.stat().st_size, "sha256": sha or file_sha256(corpus)}


@contextlib.contextmanager
def staging(index_dir: str | Path, force: bool = False) -> Iterator[Path]:
    """A temporary folder that becomes ``index_dir`` only if the block succeeds."""
    index_dir = Path(index_dir)
    if index_dir.exists() and not force:
        raise IfqaError("index folder already exists (use --force to replace it)", index_dir)
    index_dir.parent.mkdir(parents=True, exist_ok=True)
    temporary = Path(tempfile.mkdtemp(prefix=f".{index_dir.name}.", suffix=".tmp", dir=index_dir.parent))
    try:
        yield temporary
        if index_dir.exists():
            shutil.rmtree(index_dir)
        temporary.rename(index_dir)
    finally:
        if temporary.exists():
            shutil.rmtree(temporary, ignore_errors=True)


def finish_manifest(folder: Path, engine: str, params: dict, corpus: dict, passages: int, started: float, **extra) -> dict:
    manifest = {
        "engine": engine,
        "ifqa": __version__,
        "params": params,
        "corpus": corpus,
        "passages": passages,
        "build_seconds": round(time.time() - started, 2),
        **extra,
    }
    manifest["bytes"] = sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())
    write_json(folder / MANIFEST, manifest)
    return manifest


def read_manifest(index_dir: str | Path) -> dict:
    path = Path(index_dir) / MANIFEST
    if not path.exists():
        raise IfqaError("not an ifqa index (no manifest.json)", index_dir)
    try:
        return json.loads(path.read_text())
    except ValueError as exc:
        raise IfqaError(f"unreadable manifest ({exc})", path) from None


def passage_store(index_dir: Path, manifest: dict, corpus: str | Path | None = None) -> PassageStore:
    offsets = np.load(Path(index_dir) / OFFSETS, mmap_mode="r")
    return PassageStore(corpus or manifest["corpus"]["path"], offsets)
