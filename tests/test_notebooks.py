"""The experiment notebooks run top to bottom on the demo set, offline, as CI runs them."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")

EXPERIMENTS = Path(__file__).resolve().parents[1] / "experiments"


@pytest.fixture(scope="module")
def notebook_env(tmp_path_factory):
    """A copy of experiments/ to run in (the notebooks write results/ beside themselves, and the
    checkout's results/ holds only what its user ran) and a cache of its own."""
    import shutil

    cache = tmp_path_factory.mktemp("nb-cache")
    workdir = tmp_path_factory.mktemp("nb") / "experiments"
    shutil.copytree(EXPERIMENTS, workdir, ignore=shutil.ignore_patterns("results", ".ipynb_checkpoints"))
    saved = dict(os.environ)
    os.environ.update({"IFQA_CACHE_DIR": str(cache), "HF_HUB_OFFLINE": "1"})
    for name in ("IFQA_LLM_MODEL", "IFQA_LLM_BASE_URL", "IFQA_EXPERIMENT"):
        os.environ.pop(name, None)
    yield workdir
    os.environ.clear()
    os.environ.update(saved)


NOTEBOOKS = ["tutorial.ipynb", "retrieval.ipynb", "readers.ipynb"]


@pytest.mark.slow
@pytest.mark.parametrize(
    "name", [pytest.param(n, marks=pytest.mark.heavy) if n == "tutorial.ipynb" else n for n in NOTEBOOKS]
)  # the tutorial trains a reranker (83 s on 2 cores): the heavy run
def test_notebook_runs(notebook_env, name):
    workdir = notebook_env
    if name == "retrieval.ipynb":  # as experiments/README.md tells a user to run one, with what the extra installs
        command = _readme_command()
        assert command.endswith(name)
        result = subprocess.run(
            command.split(), cwd=workdir, capture_output=True, text=True, timeout=900,
            env={**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"},
        )  # fmt: skip
        assert result.returncode == 0, result.stderr[-3000:]
        book = nbformat.read(workdir / name, as_version=4)
    else:
        book = nbformat.read(workdir / name, as_version=4)
        nbclient.NotebookClient(
            book, timeout=900, kernel_name="python3", resources={"metadata": {"path": str(workdir)}}
        ).execute()
    text = "\n".join(o.get("text", "") for c in book.cells if c.cell_type == "code" for o in c.outputs)
    if name == "tutorial.ipynb":  # every step ran: a trained reranker, a scored reader, a plot
        assert "rank 1 before:" in text and "majority baseline: EM" in text and "clean + reranker" in text
        assert (workdir / "results" / "tutorial" / "recall_at_k.png").exists()
    elif name == "retrieval.ipynb":
        assert "saved" in text and (workdir / "results" / "demo" / "recall_at_k.png").exists()
    else:
        assert "Not run here (no model configured)" in text  # and no invented numbers
        assert "EM 95% CI" not in text


def _readme_command() -> str:
    """The notebook command experiments/README.md shows (an indented line starting ``jupyter``)."""
    lines = (EXPERIMENTS / "README.md").read_text().splitlines()
    return next(line.strip() for line in lines if line.startswith("    jupyter "))


PUBLIC_MODULES = {"ifqa", "ifqa.api", "ifqa.experiments", "ifqa.tables"}


def private_uses(source: str) -> list[str]:
    """Imports from ifqa beyond its public modules, and any private name (``_x``) imported, read as an
    attribute or used as a string key (``config["_stages"]``)."""
    import ast

    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "ifqa":
            if node.module not in PUBLIC_MODULES:
                found.append(f"from {node.module} import ...")
            found += [f"import {alias.name}" for alias in node.names if alias.name.startswith("_")]
        elif isinstance(node, ast.Import):
            found += [
                f"import {a.name}" for a in node.names if a.name.startswith("ifqa") and a.name not in PUBLIC_MODULES
            ]
        elif isinstance(node, ast.Attribute) and node.attr.startswith("_"):
            found.append(f".{node.attr}")
        elif (
            isinstance(node, ast.Subscript)
            and isinstance(node.slice, ast.Constant)
            and str(node.slice.value).startswith("_")
        ):
            found.append(f"[{node.slice.value!r}]")
    return found


def test_the_private_name_check_catches_what_it_should():
    assert private_uses('from ifqa.experiments.runner import question_source\nx = config["_stages"]\ny = a._root') == [
        "from ifqa.experiments.runner import ...",
        "['_stages']",
        "._root",
    ]
    assert private_uses("import ifqa\nfrom ifqa.experiments import premise_effect\nifqa.open_index('demo:bm25')") == []


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_notebooks_use_only_public_names(name):
    book = nbformat.read(EXPERIMENTS / name, as_version=4)
    source = "\n".join(cell.source for cell in book.cells if cell.cell_type == "code")
    assert private_uses(source) == []
