"""Index specs opened: a folder with a manifest, or ``SCHEME:NAME`` from the registry (told apart by
``registry.split_spec``, the one parser, which the output guard reads too).

Schemes: ``demo:bm25`` / ``demo:dense`` (the embedded demo collection, indexed into the cache on
first use, the dense index copied from the one ifqa ships, and rebuilt when its recipe changes) and ``prebuilt:NAME`` (pyserini's prebuilt Lucene
indexes, downloaded by pyserini). A folder's engine is read from its manifest and looked up in
``ifqa.registry.ENGINES``.
"""

from __future__ import annotations

import fcntl
import logging
import os
import shutil
from pathlib import Path
from typing import Any

from ifqa.errors import IfqaError
from ifqa.io import write_json
from ifqa.paths import cache_dir
from ifqa.registry import ENGINES, INDEX_SCHEMES, split_spec
from ifqa.retrieval.index import MANIFEST, Retriever, corpus_record, read_manifest, staging

log = logging.getLogger(__name__)


def index_folder(spec: str | Path) -> Path | None:
    """The folder behind a spec (building a demo index if needed); None for remote prebuilt indexes."""
    scheme, name = split_spec(spec)
    return Path(name) if scheme is None else INDEX_SCHEMES.get(scheme).folder(name)


def index_manifest(spec: str | Path) -> dict[str, Any]:
    """An index's manifest without loading the index (what experiments use to decide staleness)."""
    scheme, name = split_spec(spec)
    if scheme is not None and hasattr(INDEX_SCHEMES.get(scheme), "manifest"):
        return INDEX_SCHEMES.get(scheme).manifest(name)
    return read_manifest(index_folder(spec))


def open_index(spec: str | Path, corpus: str | Path | None = None, device: str | None = None) -> Retriever:
    """Open any index: the engine comes from the manifest (folders) or the scheme (``prebuilt:``)."""
    scheme, name = split_spec(spec)
    if scheme is not None and hasattr(INDEX_SCHEMES.get(scheme), "open"):
        return INDEX_SCHEMES.get(scheme).open(name, corpus, device)
    return _load(index_folder(spec), corpus, device)


def _load(folder: Path, corpus: str | Path | None, device: str | None) -> Retriever:
    """The index in ``folder`` by its manifest's engine; what it cannot read is one line."""
    manifest = read_manifest(folder)
    engine = manifest.get("engine")
    if engine not in ENGINES:
        raise IfqaError(f"unknown engine {engine!r} in manifest", Path(folder) / MANIFEST)
    try:
        return ENGINES.get(engine).load(folder, manifest, corpus, device)
    except IfqaError:
        raise
    except Exception as exc:  # noqa: BLE001 - whatever an engine's loader raises on a file it cannot read
        # a truncated array, vocabulary or FAISS file, a manifest missing a key its engine needs
        detail = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else ""
        raise IfqaError(f"damaged index ({type(exc).__name__}: {detail}); rebuild it with --force", folder) from None


class DemoIndexes:
    """``demo:bm25`` and ``demo:dense``: the demo collection's indexes, made in the cache on first use
    (built, or copied from the one ifqa ships when that was built from this collection and recipe)."""

    names = ("bm25", "dense")
    engines = {"bm25": "bm25s", "dense": "faiss"}

    def recipe(self, name: str) -> dict:
        """The parameters a demo index is built with; an index made with others is rebuilt."""
        if name == "bm25":
            from ifqa.retrieval.bm25 import DEFAULT_PARAMS  # a scheme's builder, when its index is made or opened

            return dict(DEFAULT_PARAMS)
        from ifqa.retrieval.engines import DenseSettings, settings_params  # a scheme's builder

        return settings_params(DenseSettings())

    def folder(self, name: str) -> Path:
        """The cached index, made on first use (``_ready``)."""
        return self._ready(name)[0]

    def open(self, name: str, corpus: str | Path | None = None, device: str | None = None) -> Retriever:
        """The cached index over the cached collection, wherever the cache now is (its manifest's
        recorded path may be that of a cache since moved). A cached copy found damaged is ifqa's
        own: it is made again, once, instead of advising an option ``retrieve`` does not have."""
        folder, cached = self._ready(name)
        try:
            return _load(folder, corpus or cached, device)
        except IfqaError as exc:
            if "damaged" not in str(exc):  # a wrong device or corpus is the user's to fix, not the cache's
                raise
            log.warning("the cached demo:%s index is damaged (%s); making it again", name, str(exc)[:160])
            shutil.rmtree(folder, ignore_errors=True)
            folder, cached = self._ready(name)
            return _load(folder, corpus or cached, device)

    def reads(self, name: str) -> list[Path]:
        """The cache files ``demo:NAME`` is read from (the output guard's view; nothing is built)."""
        from ifqa.datasets.demo import cached_corpus  # a scheme's builder, when its index is made or opened

        return [self._cached(name), cached_corpus()]

    def _cached(self, name: str) -> Path:
        return cache_dir() / "indexes" / f"demo-{name}"

    def _ready(self, name: str) -> tuple[Path, Path]:
        """The cached index and the cached collection it was made from, made on first use. Processes
        using it for the first time at once wait for one of them to make it (a lock on the cache
        folder), instead of failing on each other's build."""
        if name not in self.names:
            raise IfqaError(f"unknown demo index 'demo:{name}'; use demo:bm25 or demo:dense")
        from ifqa.datasets.demo import checked_corpus  # a scheme's builder, when its index is made or opened

        folder = self._cached(name)
        if (folder / MANIFEST).exists():  # a complete cache is only read: no lock, nothing written (a
            corpus, digest = checked_corpus()  # shared install whose cache is read-only)
            if self._fits(read_manifest(folder), name, digest):
                return folder, corpus
        folder.parent.mkdir(parents=True, exist_ok=True)
        # the lock is the cache folder's own (flock on its descriptor): no lock file to leave behind
        descriptor = os.open(folder.parent, os.O_RDONLY)
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX)  # released by the OS if this process dies
            return self._made(name, folder)
        finally:
            os.close(descriptor)

    def _made(self, name: str, folder: Path) -> tuple[Path, Path]:
        from ifqa.datasets.demo import checked_corpus  # a scheme's builder, when its index is made or opened

        corpus, digest = checked_corpus()
        if (folder / MANIFEST).exists() and self._fits(read_manifest(folder), name, digest):
            return folder, corpus
        # first use, or a newer ifqa ships another collection or index recipe
        shipped = self.shipped_folder(name)
        if (shipped / MANIFEST).exists() and self._fits(read_manifest(shipped), name, digest):
            log.info("copying the demo %s index shipped with ifqa to %s", name, folder)
            _copy_index(shipped, folder, corpus)
            return folder, corpus
        import sys

        took = "a second" if name == "bm25" else "about 3 minutes on 2 CPU cores, seconds on a GPU"
        log.info("building the demo %s index in %s (first use: %s)", name, folder, took)
        shutil.rmtree(folder, ignore_errors=True)
        progress = name != "bm25" and sys.stderr.isatty()  # a bar in a terminal; the line above elsewhere
        engine = ENGINES.get(self.engines[name])
        engine.build(corpus, folder, engine.Settings(), progress=progress)  # the recipe: the engine's defaults
        return folder, corpus

    def shipped_folder(self, name: str) -> Path:
        """Where ifqa ships a prebuilt ``demo:NAME`` (the dense one: its encoding is the only slow
        step of a fresh machine's first demo run); see ifqa/demo/README.md for how it is made."""
        from importlib import resources

        return Path(str(resources.files("ifqa.demo") / "indexes" / name))

    def _fits(self, manifest: dict, name: str, corpus_sha256: str) -> bool:
        """Built from this collection with this recipe (an index made otherwise is rebuilt)."""
        same_collection = (manifest.get("corpus") or {}).get("sha256") == corpus_sha256
        return same_collection and self.recipe(name).items() <= manifest.get("params", {}).items()


def _copy_index(source: Path, folder: Path, corpus: Path) -> None:
    """``source``'s files into ``folder`` (whole or not at all), its manifest naming ``corpus``."""
    with staging(folder, force=True) as temporary:
        for path in source.iterdir():
            if path.is_file() and path.name != MANIFEST:
                shutil.copyfile(path, temporary / path.name)
        manifest = {**read_manifest(source), "corpus": corpus_record(corpus), "copied_from": str(source)}
        manifest["bytes"] = sum(p.stat().st_size for p in temporary.iterdir())
        write_json(temporary / MANIFEST, manifest)


class PrebuiltIndexes:
    """``prebuilt:NAME``: pyserini's prebuilt Lucene indexes (``prebuilt:wikipedia-dpr-100w``)."""

    def folder(self, name: str) -> None:
        return None

    def manifest(self, name: str) -> dict[str, Any]:
        return {"engine": "pyserini", "corpus": {"sha256": f"prebuilt:{name}"}, "params": {}}

    def open(self, name: str, corpus: str | Path | None = None, device: str | None = None) -> Retriever:
        from ifqa.retrieval.lucene import LuceneRetriever  # a scheme's builder, when its index is made or opened

        return LuceneRetriever.prebuilt(name)


DEMO_INDEXES = DemoIndexes()
PREBUILT_INDEXES = PrebuiltIndexes()
