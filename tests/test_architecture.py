"""The architecture's promises: registries take a new engine or dataset as one module plus one
line, and packages do not import each other in a cycle (module size is a guide in
docs/ARCHITECTURE.md, not a test: modules are cut by job)."""

import ast
import json
from pathlib import Path

import numpy as np
import pytest

from ifqa.api import Pipeline
from ifqa.artifacts import Example, QuestionSet
from ifqa.datasets import QuestionSource
from ifqa.registry import DATASETS, ENGINES
from ifqa.retrieval.specs import open_index

PACKAGE = Path(__file__).resolve().parents[1] / "ifqa"


def test_a_toy_dataset_is_one_module_and_one_registry_line(monkeypatch, cli, tmp_path):
    monkeypatch.setattr(DATASETS, "_entries", {**DATASETS._entries, "toy": "tests.toys.toy_dataset:TOY"})
    monkeypatch.setattr(DATASETS, "_loaded", dict(DATASETS._loaded))
    questions = QuestionSource("toy").load()
    assert questions.name == "toy:dev" and [e.qid for e in questions] == ["t1", "t2"]
    assert QuestionSource("toy", "train").load().examples[0].answers == ["Lyon"]


def test_a_toy_engine_is_one_module_and_one_registry_line(monkeypatch, tmp_path):
    monkeypatch.setattr(ENGINES, "_entries", {**ENGINES._entries, "toy": "tests.toys.toy_engine:ToyRetriever"})
    corpus = tmp_path / "passages.jsonl"
    corpus.write_text(
        "".join(
            json.dumps({"id": f"p{i}", "title": t, "text": x}) + "\n"
            for i, (t, x) in enumerate(
                [("Paris", "Paris is the capital of France."), ("Lyon", "Lyon is on the Rhone.")]
            )
        )
    )
    folder = tmp_path / "toy-index"
    folder.mkdir()
    np.save(folder / "offsets.npy", np.asarray([0, len(corpus.read_text().splitlines()[0]) + 1]))
    (folder / "manifest.json").write_text(
        json.dumps({"engine": "toy", "corpus": {"path": str(corpus), "sha256": "x"}, "params": {}})
    )
    retriever = open_index(folder)
    questions = QuestionSet("toy", [Example("1", "Where is the Rhone?", ["Lyon"], ["Lyon is on the Rhone."])])
    pipeline = Pipeline(indexes=[str(folder)], k=1, searchers=[retriever])
    [record] = pipeline.run(questions)
    assert record["ctxs"][0]["id"] == "p1" and record["ctxs"][0]["gold"] and record["ctxs"][0]["has_answer"]


def _imports(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("ifqa"):
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith("ifqa"))
    return found


def _unit(module: str) -> str:
    """The package (or top-level module) a module belongs to: ifqa.retrieval.bm25 -> ifqa.retrieval."""
    parts = module.split(".")
    candidate = PACKAGE.parent.joinpath(*parts[:2])
    return ".".join(parts[:2]) if candidate.is_dir() or candidate.with_suffix(".py").exists() else "ifqa"


def test_no_import_cycle_between_packages():
    graph: dict[str, set[str]] = {}
    for path in PACKAGE.rglob("*.py"):
        module = ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        source = _unit(module)
        for target in map(_unit, _imports(path)):
            if target != source and target != "ifqa":
                graph.setdefault(source, set()).add(target)
    assert "ifqa.retrieval" in graph["ifqa.experiments"]  # the graph is real
    state: dict[str, int] = {}

    def visit(node, trail):
        state[node] = 1
        for target in graph.get(node, ()):
            if state.get(target) == 1:
                pytest.fail("import cycle: " + " -> ".join(trail + [node, target]))
            if not state.get(target):
                visit(target, trail + [node])
        state[node] = 2

    for node in list(graph):
        if not state.get(node):
            visit(node, [])


def _module_graph() -> dict[str, set[str]]:
    """Which ifqa module imports which (a name imported from a package resolves to its submodule when
    there is one, else to the package's ``__init__``), lazy imports inside functions included."""
    modules = {
        ".".join(p.relative_to(PACKAGE.parent).with_suffix("").parts).removesuffix(".__init__"): p
        for p in PACKAGE.rglob("*.py")
    }

    def resolve(name: str) -> str:
        while name not in modules and "." in name:
            name = name.rsplit(".", 1)[0]
        return name

    graph: dict[str, set[str]] = {}
    for module, path in modules.items():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("ifqa"):
                targets = {resolve(f"{node.module}.{alias.name}") for alias in node.names}
            elif isinstance(node, ast.Import):
                targets = {resolve(alias.name) for alias in node.names if alias.name.startswith("ifqa")}
            else:
                continue
            graph.setdefault(module, set()).update(t for t in targets if t in modules and t != module)
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The graph's strongly connected components of more than one node (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for target in graph.get(node, ()):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in list(graph):
        if node not in index:
            visit(node)
    return found


def test_no_import_cycle_between_modules():
    """Within a package too: a module never imports, even lazily, a module that imports it back."""
    graph = _module_graph()
    assert "ifqa.retrieval.reordering" in graph["ifqa.retrieval.rerank"]  # the graph is real
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]  # and so is the check
    assert _cycles(graph) == []


def test_every_package_is_installed():
    import tomllib

    declared = set(tomllib.loads((PACKAGE.parent / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    found = {".".join(p.parent.relative_to(PACKAGE.parent).parts) for p in PACKAGE.rglob("__init__.py")}
    assert found <= declared


def test_the_gpu_extra_installs_faiss_gpu_in_place_of_faiss_cpu():
    """`ifqa[gpu]` (GPU machines, instead of [all]): faiss-gpu and vLLM where they install (Linux x86-64),
    never faiss-cpu beside faiss-gpu (both install the `faiss` module)."""
    import tomllib
    from packaging.requirements import Requirement

    extras = tomllib.loads((PACKAGE.parent / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    gpu = [Requirement(r) for r in extras["gpu"]]
    names = {r.name for r in gpu}
    assert {"faiss-gpu", "vllm"} <= names and "faiss-cpu" not in names
    assert all("dense" not in r.extras and "all" not in r.extras for r in gpu)  # [dense] would bring faiss-cpu
    assert all(r.marker is not None for r in gpu if r.name in ("faiss-gpu", "vllm"))
