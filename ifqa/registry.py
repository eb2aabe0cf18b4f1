"""Registries as data: a name maps to ``"module:attribute"``, imported only when that name is used, so
listing names costs nothing (docs/ARCHITECTURE.md, "Registries", lists each one's interface)."""

from __future__ import annotations

import importlib
from collections.abc import Iterator
from typing import Any

from ifqa.errors import IfqaError


class Registry:
    """Names to ``"module:attribute"`` entries, imported on first use; ``requires``: the attributes every
    entry must have (a declaration missing one is refused when it loads, in one line naming it)."""

    def __init__(self, kind: str, entries: dict[str, str], package: str = "", requires: tuple[str, ...] = ()):
        self.kind, self.package, self.requires = kind, package, requires
        self._entries = dict(entries)
        self._loaded: dict[str, Any] = {}

    def register(self, name: str, target: str | Any) -> None:
        """Add (or replace) an entry: ``"module:attribute"`` (``".module"`` relative to the registry's
        package) or the object itself."""
        self._loaded.pop(name, None)
        if isinstance(target, str):
            self._entries[name] = target
        else:
            self._entries[name] = f"<object {name}>"
            self._loaded[name] = target

    def names(self) -> list[str]:
        return list(self._entries)

    def __contains__(self, name: object) -> bool:
        return name in self._entries

    def __iter__(self) -> Iterator[str]:
        return iter(self._entries)

    def get(self, name: str) -> Any:
        if name not in self._entries:
            raise IfqaError(f"unknown {self.kind} {name!r}; choose from {', '.join(self._entries)}")
        if name not in self._loaded:
            module, _, attribute = self._entries[name].partition(":")
            try:
                loaded = getattr(importlib.import_module(module, self.package or None), attribute)
            except TypeError as exc:  # a declaration (a kw_only dataclass) made without a part it requires
                raise IfqaError(f"{self.kind} {name!r}: its declaration is incomplete ({exc})") from None
            missing = [part for part in self.requires if part not in dir(loaded)]
            if missing:
                raise IfqaError(f"{self.kind} {name!r}: its declaration has no {', '.join(missing)}")
            self._loaded[name] = loaded
        return self._loaded[name]


#: Question sets: an object with ``splits``, ``default_split`` and ``load(split, data_dir)``.
DATASETS = Registry(
    "dataset",
    {
        "supervised": ".ifqa:SUPERVISED",
        "few-shot": ".ifqa:FEW_SHOT",
        "demo": ".demo:DEMO",
        "wiqa": ".wiqa:WIQA",
        "wiqa-demo": ".wiqa:WIQA_DEMO",
        "causalqa": ".causalqa:CAUSALQA",
        "causalqa-random": ".causalqa:CAUSALQA_RANDOM",
        "causalqa-demo": ".causalqa:CAUSALQA_DEMO",
        "faitheval": ".hub_sets:FAITHEVAL",
    },
    "ifqa.datasets",
)
#: Tasks (how a dataset's answers are scored and reported), by a dataset's ``task`` (default ``qa``).
TASKS = Registry(
    "task",
    {"qa": ".tasks:QA", "wiqa": ".tasks:WIQA", "causalqa": ".tasks:CAUSALQA", "mc": ".tasks:MULTIPLE_CHOICE"},
    "ifqa.eval",
)
#: Index engines, by the ``engine`` field of a manifest: a class with ``Settings``, ``build`` and
#: ``load`` (``ifqa.retrieval.engines``); ``ifqa index``, experiments' ``index`` stages and every
#: command that opens an index follow.
ENGINES = Registry(
    "index engine",
    {"bm25s": ".bm25:BM25Retriever", "pyserini": ".lucene:LuceneRetriever", "faiss": ".dense_search:DenseRetriever"},
    "ifqa.retrieval",
)
#: Index specs ``SCHEME:NAME``: an object with ``folder(name)`` (or None) and ``open(name, corpus, device)``.
INDEX_SCHEMES = Registry(
    "index scheme", {"demo": ".specs:DEMO_INDEXES", "prebuilt": ".specs:PREBUILT_INDEXES"}, "ifqa.retrieval"
)


def split_spec(spec) -> tuple[str | None, str]:
    """The one parse of an index spec: ``("demo", "bm25")`` for a registered ``SCHEME:NAME``, ``(None,
    spec)`` for a folder (``retrieval/specs.py`` opens it; the output guard refuses it as an output)."""
    text = str(spec)
    scheme, sep, name = text.partition(":")
    return (scheme, name) if sep and scheme in INDEX_SCHEMES else (None, text)


#: Query formulations: ``question -> list of sub-queries`` (several are searched and fused).
QUERY_MODES = Registry(
    "query mode",
    {
        "question": ".queries:whole_question",
        "premise": ".queries:premise_only",
        "main-clause": ".queries:main_clause",
        "clean": ".queries:cleaned",
        "split": ".queries:premise_and_main",
        "rewrite": ".rewrite:rewrite",
        "hyde": ".rewrite:hyde",
    },
    "ifqa.retrieval",
)
#: Readers: an entry with ``config`` (a dataclass type), ``model_key`` and ``read(config, job)``.
READERS = Registry(
    "reader",
    {"llm": ".llm:READER", "iterative": ".iterative:READER", "fid": ".fid:READER", "majority": ".majority:READER"},
    "ifqa.readers",
)
#: What ifqa trains (``ifqa train NAME``, an experiment's ``train`` stage): an entry with ``recipe``, ``inputs``
#: (``run`` or ``questions``), ``artifact``, ``help``, ``train(recipe, TrainJob)`` and ``summary`` (``training/kinds.py``).
TRAINABLE = Registry(
    "trainable kind",
    {
        "fid": ".kinds:FID",
        "llm": ".kinds:LLM",
        "reranker": ".kinds:RERANKER",
        "retriever": ".kinds:RETRIEVER",
        "control": ".kinds:CONTROL",
    },
    "ifqa.training",
    requires=("recipe", "inputs", "artifact", "help", "train", "summary"),
)
#: Experiment stages: a class with ``KEYS``, ``check(spec, names, path)`` and ``run(context, spec)``.
STAGES = Registry(
    "experiment stage",
    {
        "retrieve": ".stages:RetrieveStage",
        "read": ".stages:ReadStage",
        "evaluate": ".stages:EvaluateStage",
        "collection": ".build_stages:CollectionStage",
        "index": ".build_stages:IndexStage",
        "train": ".build_stages:TrainStage",
        "premise": ".premise_stage:PremiseStage",
    },
    "ifqa.experiments",
)
#: CPU runtimes a model can be exported to (``--runtime``): see ``ifqa.retrieval.runtimes``.
RUNTIMES = Registry(
    "CPU runtime", {"onnx": ".runtimes.onnx:RUNTIME", "openvino": ".runtimes.openvino:RUNTIME"}, "ifqa.retrieval"
)
#: LLM backends (``--backend``, ``--rewrite-backend``): a class with ``from_options(model, BackendOptions)``.
LLM_BACKENDS = Registry(
    "LLM backend",
    {
        "openai": ".openai_backend:OpenAIBackend",
        "llamacpp": ".llamacpp_backend:LlamaCppBackend",
        "hf": ".hf_backend:HFBackend",
        "vllm": ".vllm_backend:VLLMBackend",
    },
    "ifqa.llm",
)
#: Reranker kinds, tried in order: a class with ``claims(model)`` (whether a folder or id is of this
#: kind) and ``load(model, depth, **settings)``; the cross-encoder, last, claims any model.
RERANKERS = Registry(
    "reranker kind",
    {"control": ".control:PassagePriorReranker", "cross-encoder": ".rerank:CrossEncoderReranker"},
    "ifqa.retrieval",
)


class RuntimeNames:
    """The ``--runtime`` choices, read from ``RUNTIMES`` when asked: ``torch``, each runtime and
    ``auto``; with ``quantized``, also their ``-int8`` labels (as a YAML ``rerank_runtime`` names one)."""

    def __init__(self, quantized: bool = False):
        self.quantized = quantized

    def names(self) -> list[str]:
        exported = [*RUNTIMES.names(), "auto"]
        return ["torch", *exported] + ([f"{name}-int8" for name in exported] if self.quantized else [])

    def __iter__(self) -> Iterator[str]:  # ``in`` reads it too
        return iter(self.names())
