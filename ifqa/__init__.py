"""ifqa: retrieve-then-read question answering under counterfactual presuppositions (IfQA).

The public names (``ifqa.api``, docs/api.md; README.md's tour) are importable from here and loaded
on first use, so ``import ifqa`` stays cheap (the command line imports it too).
"""

from __future__ import annotations

from ifqa.version import __version__

_API = (
    "Hit",
    "Searcher",
    "Pipeline",
    "Reranker",
    "load_questions",
    "open_index",
    "read",
    "analyze_premise",
    "to_dataset",
    "evaluate_run",
    "evaluate_predictions",
    "exact_match",
    "f1",
    "IfqaError",
    "QuestionSet",
    "Example",
    "RunRecord",
)
_ELSEWHERE = {
    "RetrievalConfig": "ifqa.retrieval.pipeline",
    "Experiment": "ifqa.experiments.experiment",
    "run_experiment": "ifqa.experiments",
}
__all__ = [*_API, *_ELSEWHERE, "__version__"]


def __getattr__(name: str):
    import importlib

    if name in _API:
        return getattr(importlib.import_module("ifqa.api"), name)
    if name in _ELSEWHERE:
        return getattr(importlib.import_module(_ELSEWHERE[name]), name)
    raise AttributeError(f"module 'ifqa' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(__all__)
