"""The experiment notebooks run top to bottom on the demo set, offline, as CI runs them."""

import os
from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")

EXPERIMENTS = Path(__file__).resolve().parents[1] / "experiments"


@pytest.fixture(scope="module")
def notebook_env(tmp_path_factory):
    cache = tmp_path_factory.mktemp("nb-cache")
    saved = dict(os.environ)
    os.environ.update({"IFQA_CACHE_DIR": str(cache), "HF_HUB_OFFLINE": "1"})
    for name in ("IFQA_LLM_MODEL", "IFQA_LLM_BASE_URL", "IFQA_EXPERIMENT"):
        os.environ.pop(name, None)
    yield
    os.environ.clear()
    os.environ.update(saved)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["retrieval.ipynb", "readers.ipynb"])
def test_notebook_runs(notebook_env, name):
    book = nbformat.read(EXPERIMENTS / name, as_version=4)
    nbclient.NotebookClient(book, timeout=900, kernel_name="python3", resources={"metadata": {"path": str(EXPERIMENTS)}}).execute()
    text = "\n".join(o.get("text", "") for c in book.cells if c.cell_type == "code" for o in c.outputs)
    if name == "retrieval.ipynb":
        assert "saved" in text and (EXPERIMENTS / "results" / "demo" / "recall_at_k.png").exists()
    else:
        assert "Not run here (no model configured)" in text  # and no invented numbers
        assert "EM 95% CI" not in text
