"""``RetrievalConfig``: every setting of a retrieval run, declared once with its option metadata.

The options of ``ifqa retrieve`` and ``ifqa serve`` and the keys of an experiment's retrieve stages
are generated from these fields (``ifqa.configs``), so a setting added here is reachable from all
three. Kept light (no engine is imported) so the command line's help stays instant.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields

from ifqa.configs import field_default, flag, option, prefixed
from ifqa.devices import PRECISIONS
from ifqa.errors import IfqaError
from ifqa.model_options import ModelOptions
from ifqa.registry import QUERY_MODES, RuntimeNames
from ifqa.retrieval.fusion import FUSIONS

DEMO_INDEX = "demo:bm25"


def _weights(value: str) -> list[float]:
    """``--weights 0.3,0.7`` (YAML gives a list)."""
    try:
        return [float(part) for part in value.split(",")]
    except ValueError:
        raise IfqaError(f"--weights must be numbers separated by commas, got {value!r}") from None


#: Query rewriting's model (``--query-mode rewrite|hyde``): every model option of a prompting command,
#: as ``--rewrite-...`` (``configs.prefixed``), so rewriting reaches a model as every command does.
RewriteAccess = prefixed(ModelOptions, "rewrite_", "Query rewriting's model (--query-mode rewrite|hyde): ")


@dataclass
class RetrievalConfig(RewriteAccess):
    """Everything that decides a run (and so its identity in experiments), declared once: the options
    of ``ifqa retrieve`` and ``ifqa serve`` and the keys of an experiment's retrieve stages are made
    from these fields (``configs.click_options``, ``configs.from_options``)."""

    indexes: list[str] = option(
        [DEMO_INDEX],
        "Index folder (repeat for hybrid), demo:bm25|dense or prebuilt:NAME. Default: the demo collection.",
        flag="--index",
        multiple=True,
        stage_output=True,
    )
    k: int = option(20, "Passages per question.")
    query_mode: str = option(
        "question",
        "What is searched: the question, cleaned of counterfactual cue words, its premise, its main clause, "
        "premise and main clause fused, or an LLM rewrite.",
        choices=QUERY_MODES,
    )
    fusion: str = option("rrf", "How several indexes (or sub-queries) combine.", choices=tuple(FUSIONS))
    weights: list[float] | None = option(None, "Per-index fusion weights, e.g. 0.3,0.7.", parse=_weights)
    depth: int = option(100, "Passages each list contributes when several are fused.", flag="--fusion-depth")
    corpus: str | None = option(None, "The collection file, if it moved since indexing.")
    device: str | None = option(None, "Device for dense query encoding and reranking (cpu, cuda).")
    threads: int | None = option(
        None, "Scoring threads (default: every core, or OMP_NUM_THREADS where set: a scheduler's share)."
    )
    batch_size: int = option(64, "Questions searched together.")
    query_encoder: str | None = option(
        None,
        "Question-side encoder from `ifqa train retriever --question-side-only` for dense indexes.",
        stage_output=True,
    )
    verify_corpus: bool = option(
        False,
        "Also check the collection's full sha256 against the index (size and sampled passages are always checked).",
    )
    rerank: str | None = option(
        None,
        "Rerank the first stage's top passages with this cross-encoder or control (folder or hub id).",
        stage_output=True,
    )
    rerank_depth: int = option(100, "First-stage passages the reranker re-scores.")
    rerank_runtime: str = option(
        "torch",
        "Reranking on PyTorch (any device), or exported once to a CPU runtime (cached; pip install "
        "'ifqa[onnx]' or 'ifqa[openvino]'); auto: the export measured fastest on this kind of CPU; "
        "-int8 (or --rerank-quantize int8): int8 weights, checked against fp32 on a probe batch.",
        choices=RuntimeNames(quantized=True),
        renamed_from="rerank_backend",
    )
    rerank_precision: str = option(
        "auto",
        "Reranker weights' precision: auto is bf16 on a GPU (fp16 where bf16 is emulated) and fp32 on every "
        "CPU (the same scores on any CPU); bf16 on a CPU with AMX or AVX-512 BF16 when asked.",
        choices=PRECISIONS,
    )

    def __post_init__(self) -> None:
        """Every value checked here, once, whether it came from the command line, Python or an
        experiment's YAML (``from_options`` only reads types; the counts' ranges are checked here
        alone, and the layers below, rerankers and engines, take them as valid): a wrong type or
        value is one line before any index is opened."""
        if not isinstance(self.indexes, list) or not all(isinstance(i, str) and i for i in self.indexes):
            raise IfqaError(f"{_named('indexes')} must be a list of index folders or specs, got {self.indexes!r}"[:200])
        for name in ("k", "depth", "threads", "batch_size", "rerank_depth"):
            value = getattr(self, name)
            if value is None and name == "threads":  # every core
                continue
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise IfqaError(f"{_named(name)} must be a whole number of at least 1, got {value!r}")
        if self.fusion not in FUSIONS:
            raise IfqaError(f"unknown fusion {self.fusion!r}; choose from {', '.join(FUSIONS)}")
        if self.weights is not None:
            weights = list(self.weights) if isinstance(self.weights, (list, tuple)) else None
            if (
                weights is None
                or not all(isinstance(w, (int, float)) and not isinstance(w, bool) for w in weights)
                or not all(math.isfinite(w) and w >= 0 for w in weights)
                or not any(weights)
            ):
                raise IfqaError(
                    f"{_named('weights')} must be finite numbers, not negative and not all 0, got {self.weights!r}"[
                        :200
                    ]
                )
            if len(self.indexes) < 2:
                raise IfqaError(f"{_named('weights')} fuse several indexes; give two or more indexes, or no weights")
            if len(weights) != len(self.indexes):
                raise IfqaError(
                    f"{_named('weights')} need one weight per index ({len(self.indexes)}), got {len(weights)}"
                )
        for name in ("rerank", "query_encoder", "rewrite_model", "rewrite_base_url", "corpus", "device"):
            if getattr(self, name) is not None and not isinstance(getattr(self, name), str):
                raise IfqaError(f"{_named(name)} must be a string, got {getattr(self, name)!r}"[:200])
        if not isinstance(self.query_mode, str):
            raise IfqaError(f"query mode must be a string, got {self.query_mode!r}")
        model_asked = asks_a_model(self.query_mode)  # an unknown mode fails here
        rewriting = [
            f.name for f in fields(self) if f.name.startswith("rewrite_") and getattr(self, f.name) != field_default(f)
        ]
        if model_asked and not self.rewrite_model:  # before any index opens
            raise IfqaError(
                f"query mode {self.query_mode!r} needs a model: --rewrite-model NAME (and --rewrite-base-url "
                "for an OpenAI-compatible server)"
            )
        if rewriting and not model_asked:  # the rewriting model's settings would do nothing
            raise IfqaError(
                f"{_named(rewriting[0])} applies to a query mode that asks a model (--query-mode rewrite or "
                f"hyde), not {self.query_mode!r}"
            )
        for name, needed in DEPENDS_ON.items():  # a setting that would do nothing without another is refused
            if getattr(self, name) != getattr(RetrievalConfig, name, None) and getattr(self, needed) is None:
                raise IfqaError(f"{_named(name)} applies to {_named(needed)}, which is not given")


def asks_a_model(query_mode: str) -> bool:
    """Whether a query mode's queries are written by a model (rewrite, hyde: ``LLMFormulation``)."""
    return hasattr(QUERY_MODES.get(query_mode), "for_config")


FIELDS = {f.name: f for f in fields(RetrievalConfig)}
#: Settings that only act through another one: given without it, they would silently do nothing.
DEPENDS_ON = {"rerank_runtime": "rerank", "rerank_depth": "rerank", "rerank_precision": "rerank"}


def _named(name: str) -> str:
    """A setting as both its YAML key and its option: ``rerank_depth (--rerank-depth)``."""
    return f"{name} ({flag(FIELDS[name])})"
