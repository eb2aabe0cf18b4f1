"""Index builders for an experiment's ``index`` stage, by its ``engine:`` key (``INDEX_BUILDERS``):
``build(corpus, folder, spec, progress)`` with the stage's settings already resolved. A new engine
is a builder here (or in its own module) and one line in the registry."""

from __future__ import annotations

from pathlib import Path


def build_bm25(corpus: Path, folder: Path, spec: dict, progress: bool) -> dict:
    from ifqa.retrieval import bm25

    return bm25.build(corpus, folder, progress=progress)


def build_dense(corpus: Path, folder: Path, spec: dict, progress: bool) -> dict:
    from ifqa.retrieval import DEFAULT_ENCODER, DENSE_MAX_LENGTH, dense

    return dense.build(
        corpus,
        folder,
        spec.get("encoder") or DEFAULT_ENCODER,
        index_type=spec.get("index_type", "flat"),
        progress=progress,
        max_length=spec.get("max_length") or DENSE_MAX_LENGTH,
        titles=spec.get("titles", True),
    )
