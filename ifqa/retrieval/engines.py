"""What an index engine is: one class, registered in ``ifqa.registry.ENGINES``, that builds an index
folder (``build``) and opens it again (``load``), with a ``Settings`` dataclass of what its indexes are
built with (the manifest's ``params``, read back and checked by ``settings_of`` on every open). The
contract is ``Engine`` below and the ``ENGINES`` row of docs/ARCHITECTURE.md; tests/test_architecture.py
holds every registered engine to it. This module stays light (the command line reads the settings'
defaults and help from it).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from ifqa.configs import field_default, flag, from_options, option, option_fields
from ifqa.registry import ENGINES
from ifqa.retrieval import BM25_B, BM25_K1, DEFAULT_ENCODER, DENSE_MAX_LENGTH

if TYPE_CHECKING:
    from ifqa.retrieval.index import Retriever

#: The hand-written ``ifqa index`` commands and the engines they build: an experiment's index stage
#: may name a command (``engine: dense``) for its first engine, as well as any registered engine.
INDEX_COMMANDS = {"bm25": ("bm25s", "pyserini"), "dense": ("faiss",)}

#: FAISS index types a dense index can be built as.
INDEX_TYPES = ("flat", "hnsw", "ivfpq")


@dataclass(frozen=True)
class BM25Settings:
    """BM25's two parameters, the same for bm25s and Lucene (both rank alike with them)."""

    k1: float = option(BM25_K1, "BM25 term-frequency saturation (pyserini's default).", min=0)
    b: float = option(BM25_B, "BM25 length normalization, 0 to 1 (pyserini's default).", min=0, max=1)


@dataclass(frozen=True)
class DenseSettings:
    """What a dense index's passages are encoded with and how FAISS holds them."""

    encoder: str = option(
        DEFAULT_ENCODER, "sentence-transformers model or DPR context encoder: hub id or local folder."
    )
    query_encoder: str | None = option(None, "DPR question encoder (default: derived from --encoder).")
    index_type: str = option(
        "flat", "FAISS index: exact inner product, HNSW graph, or compressed IVF-PQ.", choices=INDEX_TYPES
    )
    max_length: int = option(
        DENSE_MAX_LENGTH,
        f"Truncate inputs to this many tokens (all-MiniLM-L6-v2 was trained at {DENSE_MAX_LENGTH}; the demo "
        "index and the figures in docs/ use it).",
        min=1,
    )
    titles: bool = option(
        True, "Encode passage text without titles (the form trained retrievers read).", flag="--no-titles"
    )


class Engine(Protocol):
    """The registry's view of an engine class (see the module docstring)."""

    Settings: type

    @staticmethod
    def build(
        corpus: Path, folder: Path, settings: Any, *, progress: bool = True, force: bool = False, **how: Any
    ) -> dict:
        """Build the index folder atomically; return its manifest."""

    @classmethod
    def load(cls, folder: Path, manifest: dict, corpus: str | Path | None, device: str | None) -> Retriever:
        """Open the index folder."""


def settings_of(engine: Engine, manifest: dict, folder: Path | None = None) -> Any:
    """The settings an index was built with, read back from its manifest's ``params`` (keys the
    settings do not hold, such as FAISS's own ``nlist``, are the engine's to read)."""
    names = {f.name for f in option_fields(engine.Settings)}
    params = {key: value for key, value in (manifest.get("params") or {}).items() if key in names}
    return from_options(engine.Settings, params, str(Path(folder) / "manifest.json") if folder else None)


def settings_params(settings: Any) -> dict:
    """The settings as the manifest records them."""
    return dataclasses.asdict(settings)


def engine_table() -> str:
    """The engines, the command that builds each and their settings, as docs/retrieval.md shows them
    (tests/test_docs.py holds the page to this, so a registered engine is documented)."""
    rows = ["| engine | built by | settings (default) |", "|---|---|---|"]
    for name in ENGINES.names():
        command = next((c for c, engines in INDEX_COMMANDS.items() if name in engines), name)
        fields = option_fields(ENGINES.get(name).Settings)
        settings = ", ".join(
            f"`{flag(f)}`" + ("" if isinstance(field_default(f), bool | None) else f" ({field_default(f)})")
            for f in fields
        )
        rows.append(f"| `{name}` | `ifqa index {command}` | {settings} |")
    return "\n".join(rows)
