"""The embedded demo set: a small passage collection and hand-written counterfactual questions.

See README.md in this folder. It is a demo that lets every command run offline, not a benchmark.
The collection ships gzipped; it is unpacked (and indexed) into the ifqa cache on first use.
"""

from __future__ import annotations

import gzip
import logging
import shutil
from importlib import resources
from pathlib import Path

from ifqa.paths import cache_dir

log = logging.getLogger(__name__)

PASSAGES = "passages.jsonl.gz"


def packaged_passages() -> Path:
    """The gzipped demo passages inside the installed package."""
    return Path(str(resources.files(__name__) / PASSAGES))


def corpus_path() -> Path:
    """The demo collection unpacked into the cache (done once; atomic)."""
    from ifqa.io import atomic_write

    target = cache_dir() / "demo" / "passages.jsonl"
    source = packaged_passages()
    stamp = target.with_suffix(".source-size")
    if not target.exists() or not stamp.exists() or stamp.read_text() != str(source.stat().st_size):
        log.info("unpacking the demo collection to %s", target)
        with gzip.open(source, "rb") as packed, atomic_write(target, "wb") as out:
            shutil.copyfileobj(packed, out)
        stamp.write_text(str(source.stat().st_size))
    return target


def _recipe(engine: str) -> dict:
    """The parameters a demo index is built with; an index made with others is rebuilt."""
    if engine == "bm25":
        from ifqa.retrieval.bm25 import DEFAULT_PARAMS

        return dict(DEFAULT_PARAMS)
    from ifqa.retrieval.encoders import DEFAULT_ENCODER

    return {"encoder": DEFAULT_ENCODER, "max_length": 128}


def index_path(engine: str = "bm25") -> Path:
    """The demo index of that engine, built into the cache on first use."""
    import json

    from ifqa.retrieval.index import file_sha256

    folder = cache_dir() / "indexes" / f"demo-{engine}"
    corpus = corpus_path()
    manifest = folder / "manifest.json"
    current = False
    if manifest.exists():
        built = json.loads(manifest.read_text())
        current = built["corpus"]["sha256"] == file_sha256(corpus) and _recipe(engine).items() <= built["params"].items()
    if not current:  # first use, or a newer ifqa ships another collection or index recipe
        log.info("building the demo %s index in %s (first use)", engine, folder)
        shutil.rmtree(folder, ignore_errors=True)
        if engine == "bm25":
            from ifqa.retrieval import bm25

            bm25.build(corpus, folder, progress=False)
        elif engine == "dense":
            from ifqa.retrieval import dense

            dense.build(corpus, folder, progress=False, max_length=128)
        else:
            raise ValueError(engine)
    return folder
