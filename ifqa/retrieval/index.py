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
import logging
import shutil
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Protocol

import numpy as np

from ifqa.errors import IfqaError
from ifqa.io import (
    aside,
    exclusive,
    file_sha256,
    publish_dir,
    read_manifest_object,
    settled,
    staging_prefix,
    write_json,
)
from ifqa.retrieval.store import PassageStore, iter_corpus
from ifqa.version import __version__

log = logging.getLogger(__name__)

MANIFEST = "manifest.json"
OFFSETS = "offsets.npy"

#: An engine's ranking: (passage position, score) pairs, best first (cheap to fuse); a final list
#: becomes ``hits.Hit`` objects, the one ranked-passage type from the pipeline to the run file.
Positions = list[tuple[int, float]]


class Retriever(Protocol):
    """The one interface every backend offers."""

    name: str
    manifest: dict
    passages: PassageStore

    def search(self, queries: Sequence[str], k: int, threads: int = 1) -> list[Positions]:
        """Top-``k`` passages for each query."""


def corpus_record(corpus: Path) -> dict[str, Any]:
    """Identify a collection: its manifest's checksum when the builder left one, else computed. A
    collection without a single passage is refused (every builder comes here first)."""
    if next(iter_corpus(corpus), None) is None:
        raise IfqaError("holds no passages; an index needs at least one", corpus)
    corpus = Path(corpus).resolve()
    built = Path(f"{corpus}.manifest.json")
    sha = None
    if built.exists():
        with contextlib.suppress(ValueError, OSError):
            sha = json.loads(built.read_text()).get("sha256")
    return {"path": str(corpus), "bytes": corpus.stat().st_size, "sha256": sha or file_sha256(corpus)}


def finished(folder: str | Path, engine: str, params: dict, corpus: dict, force: bool = False) -> dict | None:
    """The manifest of the index ``folder`` already holds when it was built by ``engine`` with these
    ``params`` (each as its manifest records it) from this collection (``corpus_record``: the same
    bytes) and is complete, else None.
    A build finds its work done there and says so, as ``make`` would: a rerun of a build killed in its
    last second cannot tell itself from a failure, and is not one. ``--force`` builds again."""
    if force:
        return None
    with exclusive(folder, "another build into this folder is running"):  # a killed build's lock goes too
        folder = settled(Path(folder))
        try:
            manifest = json.loads((folder / MANIFEST).read_text(encoding="utf-8"))
        except (ValueError, OSError):  # none yet, or not whole: the build says what it finds
            return None
    recorded = manifest.get("params") if isinstance(manifest, dict) else None
    same = (
        isinstance(recorded, dict)
        and manifest.get("engine") == engine
        and all(recorded.get(key) == value for key, value in json.loads(json.dumps(params)).items())
        and (manifest.get("corpus") or {}).get("sha256") == corpus.get("sha256")
    )
    if not same:
        return None
    log.info("%s already holds this index (same collection, engine and settings): nothing to build", folder)
    return manifest


@contextlib.contextmanager
def staging(index_dir: str | Path, force: bool = False) -> Iterator[Path]:
    """A temporary folder that becomes ``index_dir`` only if the block succeeds.

    Enter it before any work: an existing folder is refused at once, and a concurrent build into the
    same folder fails clearly (a lock) instead of replacing the other one's result.
    """
    index_dir = Path(index_dir)
    with exclusive(index_dir, "another build into this folder is running"):  # first: a refusal leaves no lock
        if settled(index_dir).exists() and not force:
            raise IfqaError(
                "index folder already exists, built from other inputs or settings (use --force to replace it)",
                index_dir,
            )
        temporary = Path(tempfile.mkdtemp(prefix=staging_prefix(index_dir), suffix=".tmp", dir=index_dir.parent))
        try:
            yield temporary
            if index_dir.exists():
                if not force:  # appeared while we worked: never replace it silently
                    raise IfqaError("index folder appeared during the build (use --force to replace it)", index_dir)
            publish_dir(temporary, index_dir)
        finally:
            if temporary.exists():
                shutil.rmtree(temporary, ignore_errors=True)


def finish_manifest(
    folder: Path, engine: str, params: dict, corpus: dict, passages: int, started: float, **extra
) -> dict:
    if (folder / OFFSETS).exists():  # passages hashed at recorded positions: checked on every open
        corpus = {**corpus, "fingerprint": fingerprint(PassageStore(corpus["path"], np.load(folder / OFFSETS)))}
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


@dataclass(frozen=True)
class StagedBuild:
    """What an engine writes an index from: its staging ``folder``, the collection (``corpus``, its
    ``corpus_record``) and whether to show progress."""

    folder: Path
    corpus: Path
    record: dict
    progress: bool


class StagedEngine:
    """The build every engine that writes its folder whole in one pass shares (bm25s, Lucene): the work
    found done when the folder holds this collection built with these params (``finished``), else the
    engine's ``write`` into a staging folder that replaces ``folder`` only once whole, manifest last. An
    engine gives ``ENGINE`` (its registry name, as its manifest records it), ``Settings``,
    ``params(settings)`` (what its manifest records) and ``write(StagedBuild, settings, **how) -> (passages,
    manifest extras)``. (``ENGINE``, not ``engine``: a searcher's ``engine`` is the engine it wraps.)"""

    ENGINE: ClassVar[str]
    Settings: ClassVar[type]

    @classmethod
    def build(
        cls,
        corpus: str | Path,
        folder: str | Path,
        settings: Any = None,
        *,
        progress: bool = True,
        force: bool = False,
        **how: Any,
    ) -> dict:
        """Build ``folder`` from ``corpus`` (``how``: the engine's own options); returns its manifest."""
        started, settings = time.time(), settings or cls.Settings()
        params, record = cls.params(settings), corpus_record(Path(corpus))
        done = finished(folder, cls.ENGINE, params, record, force)
        if done is not None:
            return done
        with staging(folder, force) as staged:
            passages, extra = cls.write(StagedBuild(staged, Path(corpus), record, progress), settings, **how)
            return finish_manifest(staged, cls.ENGINE, params, record, passages, started, **extra)


FINGERPRINT_PASSAGES = 16


def fingerprint(store: PassageStore) -> dict:
    """A cheap identity of a collection beyond its size and offsets: the sha256 of a few passages
    spread over it (another collection of the same size whose passages start at the same bytes, or a
    hand-edited one, differs there)."""
    n = len(store)
    positions = sorted({round(i * (n - 1) / max(1, FINGERPRINT_PASSAGES - 1)) for i in range(FINGERPRINT_PASSAGES)})
    digest = hashlib.sha256()
    for position in positions:
        digest.update(json.dumps(store[position], sort_keys=True, ensure_ascii=False).encode("utf-8"))
    return {"positions": positions, "sha256": digest.hexdigest()}


def read_manifest(index_dir: str | Path) -> dict:
    """An index's manifest, its shape checked: a damaged or hand-edited one is one line naming it."""
    path = Path(index_dir) / MANIFEST
    if not Path(index_dir).exists() and aside(index_dir).is_dir():  # readers never move folders: builds do
        raise IfqaError(
            f"a --force rebuild was killed while swapping it in; the previous index is at {aside(index_dir)}: "
            "rerun that build to finish it",
            index_dir,
        )
    if not Path(index_dir).exists():
        raise IfqaError("no such index folder (build one with `ifqa index bm25|dense`, or use demo:bm25)", index_dir)
    if not path.exists():
        raise IfqaError("not an ifqa index (no manifest.json)", index_dir)
    manifest = read_manifest_object(path)
    problem = _manifest_problem(manifest)
    if problem:
        raise IfqaError(f"damaged manifest: {problem}", path)
    return manifest


def _manifest_problem(manifest: dict) -> str | None:
    if not isinstance(manifest.get("engine"), str):
        return "'engine' must be a string"
    corpus = manifest.get("corpus")
    if corpus is not None and not (isinstance(corpus, dict) and isinstance(corpus.get("path"), str)):
        return "'corpus' must be an object with a 'path'"
    if "params" in manifest and not isinstance(manifest["params"], dict):
        return "'params' must be an object"
    passages = manifest.get("passages")
    if passages is not None and (isinstance(passages, bool) or not isinstance(passages, int) or passages < 1):
        return f"'passages' must be a positive integer, got {passages!r}"
    return None


def passage_store(index_dir: Path, manifest: dict, corpus: str | Path | None = None) -> PassageStore:
    """The indexed collection, checked against the manifest: its size, and that passages start where the
    offsets say (cheap; ``verify_collection`` adds the full checksum). Another file under the same name
    is refused."""
    path = Path(index_dir) / OFFSETS
    if not path.exists():
        raise IfqaError(f"damaged index: {OFFSETS} is missing (rebuild it)", index_dir)
    try:
        offsets = np.load(path, mmap_mode="r")
    except (ValueError, OSError) as exc:
        raise IfqaError(f"damaged index: unreadable {OFFSETS} ({exc})", index_dir) from None
    if offsets.ndim != 1 or offsets.dtype.kind not in "iu" or (len(offsets) > 1 and not (np.diff(offsets) > 0).all()):
        raise IfqaError(
            f"damaged index: {OFFSETS} must hold increasing integer byte offsets (found {offsets.dtype} "
            f"of shape {offsets.shape}); rebuild it with --force",
            index_dir,
        )
    recorded = manifest.get("corpus") or {}
    if manifest.get("passages") is not None and len(offsets) != manifest["passages"]:
        raise IfqaError(
            f"damaged index: {OFFSETS} holds {len(offsets)} offsets, the manifest {manifest['passages']} "
            "passages (rebuild it)",
            index_dir,
        )
    if not (corpus or recorded.get("path")):
        raise IfqaError("the manifest names no collection; pass --corpus", Path(index_dir) / MANIFEST)
    if corpus and not Path(corpus).exists():
        raise IfqaError("no such file (given as --corpus: the collection this index was built from)", corpus)
    store = PassageStore(corpus or recorded["path"], offsets)
    size = store.corpus.stat().st_size
    if recorded.get("bytes") is not None and size != recorded["bytes"]:
        raise IfqaError(
            f"not the collection this index was built from ({size} bytes, the index's has "
            f"{recorded['bytes']}; manifest {Path(index_dir) / MANIFEST})",
            store.corpus,
        )
    store.check_offsets()
    recorded_print = recorded.get("fingerprint")
    if isinstance(recorded_print, dict) and isinstance(recorded_print.get("positions"), list):
        if fingerprint(store) != recorded_print:
            raise IfqaError(
                f"not the collection this index was built from (its passages differ at positions the "
                f"manifest {Path(index_dir) / MANIFEST} fingerprints)",
                store.corpus,
            )
    return store


def verify_collection(retriever) -> None:
    """The full check (``ifqa retrieve --verify-corpus``): the collection's sha256 against the manifest."""
    recorded = retriever.manifest.get("corpus", {})
    corpus = getattr(retriever.passages, "corpus", None)
    if corpus is None or not recorded.get("sha256"):
        return  # prebuilt indexes carry their own passages
    if file_sha256(corpus) != recorded["sha256"]:
        raise IfqaError(
            f"not the collection {retriever.name} was built from (its sha256 differs from the index manifest's)", corpus
        )
