"""The iterative reader's settings: the model's (``ModelAccess``), the retrieval it asks (the options of
``ifqa retrieve``, each the same declaration as ``RetrievalConfig``'s), and the budgets of the loop."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from ifqa.configs import option
from ifqa.errors import IfqaError
from ifqa.llm.config import ModelAccess
from ifqa.retrieval.config import FIELDS, RetrievalConfig, asks_a_model

PROTOCOLS = ("search-tags", "ircot")


def _as_in_retrieve(name: str, default=dataclasses.MISSING):
    """A field declared as ``RetrievalConfig``'s (its help, choices, bounds and flag), so ``--index``,
    ``--k`` and ``--rerank`` mean here what they mean to ``ifqa retrieve``."""
    source = FIELDS[name]
    value = source.default if default is dataclasses.MISSING else default
    if source.default_factory is not dataclasses.MISSING and default is dataclasses.MISSING:  # type: ignore[misc]
        return dataclasses.field(default_factory=source.default_factory, metadata=source.metadata)  # type: ignore[misc]
    return dataclasses.field(default=value, metadata=source.metadata)


@dataclass(frozen=True)
class IterativeConfig(ModelAccess):
    ALSO_USED = frozenset({"device"})  # the reader's device serves retrieval and reranking too
    PURPOSE = "the iterative reader"

    protocol: str = option(
        "search-tags",
        "How the model asks for evidence: <search>query</search> as it reasons, answered with passages "
        "(Search-o1, Search-R1, R1-Searcher), or IRCoT (each reasoning sentence is the next query).",
        choices=PROTOCOLS,
    )
    indexes: list[str] = _as_in_retrieve("indexes")
    k: int = _as_in_retrieve("k", 3)  # passages per search: a step adds a few, not a run's 20
    query_mode: str = _as_in_retrieve("query_mode")
    fusion: str = _as_in_retrieve("fusion")
    rerank: str | None = _as_in_retrieve("rerank")
    rerank_depth: int = _as_in_retrieve("rerank_depth")
    max_steps: int = option(5, "Steps (model turns) per question; a model still searching then is stopped.", min=1)
    passages: int = option(10, "Passages kept in the prompt (the latest first to stay), over all searches.", min=1)
    max_tokens: int | None = option(None, "Tokens per step (default 256, or 8192 for a model that thinks).", min=1)
    max_prompt_tokens: int = option(6000, "Prompt budget: the oldest passages leave the prompt first.", min=64)
    seed: int = option(0, "Seed sent with each request.")
    prompts_dir: str | None = option(None, "Folder of iterative_*.txt templates (default: the installed prompts).")

    def retrieval(self) -> RetrievalConfig:
        """The ``RetrievalConfig`` of these settings (the reader's device serves retrieval too)."""
        if asks_a_model(self.query_mode):  # rewrite, hyde: a second model's queries
            raise IfqaError(
                f"--query-mode {self.query_mode} asks a second model to write the queries; here the model writes "
                "its own searches: use question, clean, premise, main-clause or split"
            )
        shared = ("k", "query_mode", "fusion", "rerank", "rerank_depth", "device")
        return RetrievalConfig(indexes=list(self.indexes), **{name: getattr(self, name) for name in shared})

    def output_name(self, label: str) -> str:
        model = (self.model or "model").rstrip("/").replace("/", "_").replace(":", "_")
        return f"{label}-iterative-{self.protocol}-{model}.jsonl"
