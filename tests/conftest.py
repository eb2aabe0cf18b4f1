"""Shared test helpers: the CLI runner, the optional ../shared data, and a local HTTP server."""

from __future__ import annotations

import contextlib
import functools
import http.server
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared" / "data"
#: What a test run may leave in the checkout: interpreters' and tools' own caches, the environment.
NOT_OURS = {".git", ".venv", "__pycache__", ".pytest_cache", ".ruff_cache", "ifqa.egg-info"}


def _checkout_files() -> dict[str, tuple[int, int]]:
    """Every file of the checkout (beyond NOT_OURS) with its size and modification time."""
    files = {}
    for folder, subfolders, names in os.walk(ROOT):
        subfolders[:] = [name for name in subfolders if name not in NOT_OURS and not name.startswith(".venv")]
        for name in names:
            path = os.path.join(folder, name)
            with contextlib.suppress(OSError):
                stat = os.stat(path)
                files[os.path.relpath(path, ROOT)] = (stat.st_size, stat.st_mtime_ns)
    return files


def pytest_configure(config):
    """The run writes nothing into the checkout or the user's cache: one temporary ifqa cache for the
    session (inherited by every CLI subprocess), no hypothesis example database, and none of the
    user's ``IFQA_*`` variables."""
    from ifqa.environment import VARIABLES

    for name in VARIABLES:  # a researcher's own settings never steer a test (IFQA_FEED_WORKERS=2 failed one)
        os.environ.pop(name, None)
    config._ifqa_cache = Path(tempfile.mkdtemp(prefix="ifqa-test-cache-"))
    os.environ["IFQA_CACHE_DIR"] = str(config._ifqa_cache)
    config._ifqa_checkout = _checkout_files()
    _share_the_cores(config)
    with contextlib.suppress(ImportError):
        from hypothesis import settings
        from hypothesis.configuration import set_hypothesis_home_dir

        set_hypothesis_home_dir(str(config._ifqa_cache / "hypothesis"))
        settings.register_profile("ifqa", database=None, deadline=None, derandomize=True)  # same examples every run
        settings.load_profile("ifqa")


#: The thread-count variables of the native runtimes the package drives (torch's OpenMP and MKL,
#: OpenBLAS through numpy); ONNX Runtime and OpenVINO follow torch's count (retrieval/exported.py).
THREAD_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")


def _share_the_cores(config) -> None:
    """With parallel workers, each worker's processes (itself, its CLI subprocesses, notebook kernels)
    get an equal share of the cores, unless the user set a count. Two workers each running torch
    with every core make OpenMP threads wait on descheduled ones: a tiny reranker's 96 training
    steps took 157 s beside the dense-index notebook instead of 15 s alone."""
    workers = getattr(config.option, "numprocesses", None) or int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", 0))
    if not isinstance(workers, int) or workers < 2:
        return
    share = str(max(1, (os.cpu_count() or 1) // workers))
    for name in THREAD_VARIABLES:
        os.environ.setdefault(name, share)
    torch = sys.modules.get("torch")
    if torch is not None:
        torch.set_num_threads(int(os.environ["OMP_NUM_THREADS"]))


def pytest_sessionfinish(session, exitstatus):
    """Fail the run when a test wrote into the checkout (a newcomer's experiments/results/ would
    report stages they never ran as up to date)."""
    config = session.config
    shutil.rmtree(getattr(config, "_ifqa_cache", ""), ignore_errors=True)
    before, after = getattr(config, "_ifqa_checkout", None), _checkout_files()
    if before is None:
        return
    written = sorted(path for path, stat in after.items() if before.get(path) != stat)
    if written:
        shown = ", ".join(written[:10]) + (f" and {len(written) - 10} more" if len(written) > 10 else "")
        session.config.get_terminal_writer().line(f"tests wrote into the checkout: {shown}", red=True)
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


#: The tier CI runs on every Python beside the project's own (3.12 and 3.13: ``pytest -m versions``):
#: the command line walked and every command's documented run, the real model (llama.cpp in process and
#: its server), and each optional engine's tests (Lucene, FAISS and the dense encoders, the exported runtimes).
VERSIONS_TIER = (
    "tests/test_cli.py",
    "tests/test_docs.py",
    "tests/llm/test_llamacpp.py",
    "tests/llm/test_real_server.py",
    "tests/llm/test_protocol.py",
    "tests/retrieval/test_lucene.py",
    "tests/retrieval/test_dense.py",
    "tests/retrieval/test_exported.py",
    "tests/retrieval/test_tokens.py",
    "tests/retrieval/test_retrieve_cli.py",
    "tests/readers/test_fid.py",
    "tests/training/test_reranker.py",
)


def pytest_collection_modifyitems(config, items):
    """Modules holding a slow test first, in collection order (the workers take modules in this order:
    the long ones start early instead of one finishing alone at the end; longest-first measured no
    faster in clean-clone runs here, 903 s against 797 s and 938 s for this order on a shared
    machine); tests needing ../shared skipped without it; the modules of ``VERSIONS_TIER`` marked
    ``versions``."""
    tier = {ROOT / name for name in VERSIONS_TIER}
    for item in items:
        if item.path in tier:
            item.add_marker(pytest.mark.versions)
    slow_modules = {item.path for item in items if "slow" in item.keywords}
    items.sort(key=lambda item: item.path not in slow_modules)  # stable: each module's own order kept
    if SHARED.is_dir():
        return
    skip = pytest.mark.skip(reason="../shared/data not present")
    for item in items:
        if "shared_data" in item.keywords:
            item.add_marker(skip)


@pytest.fixture
def shared() -> Path:
    return SHARED


def run_cli(
    *args: str, cwd: Path | None = None, env: dict | None = None, timeout: int = 300
) -> subprocess.CompletedProcess:
    """Run `ifqa ...` as a user would, in this process (tests/in_process.py says what it rebuilds
    for each call); ``timeout`` applies only to :func:`run_cli_process`."""
    from tests.in_process import run_in_process

    return run_in_process(*args, cwd=cwd, env=env)


def run_cli_process(
    *args: str, cwd: Path | None = None, env: dict | None = None, timeout: int = 300
) -> subprocess.CompletedProcess:
    """Run `ifqa ...` in a fresh interpreter: for tests whose point is the process itself."""
    return subprocess.run(
        [sys.executable, "-m", "ifqa.cli", *map(str, args)],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=env,
        timeout=timeout,
    )


@pytest.fixture
def cli():
    return run_cli


@pytest.fixture(scope="session")
def demo_index_cache(tmp_path_factory) -> Path:
    """A cache holding the demo BM25 index, built once per session: a test whose subject is not the index
    starts its own cache as a copy (``cache_with_demo_index``) instead of building it again (2 s each).
    Never handed to a test itself: it is shared."""
    from unittest import mock

    from ifqa.retrieval.specs import open_index

    folder = tmp_path_factory.mktemp("demo-index-cache")
    with mock.patch.dict(os.environ, {"IFQA_CACHE_DIR": str(folder)}):
        open_index("demo:bm25")
    return folder


@pytest.fixture
def cache_with_demo_index(tmp_path, demo_index_cache) -> Path:
    """The test's own fresh cache (``tmp_path / "cache"``), already holding the demo BM25 index."""
    return Path(shutil.copytree(demo_index_cache, tmp_path / "cache"))


def write_questions(path: Path, examples: list[dict]) -> Path:
    path.write_text(json.dumps(examples))
    return path


@pytest.fixture
def http_server(tmp_path):
    """Serve files from a temporary folder on 127.0.0.1; yields (root folder, base URL)."""
    root = tmp_path / "served"
    root.mkdir()
    handler = functools.partial(_QuietHandler, directory=str(root))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield root, f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory):
    """A tiny random BERT with the offline MiniLM's vocabulary (see tests/training/tiny.py)."""
    from tests.training.tiny import tiny_bert

    return tiny_bert(tmp_path_factory.mktemp("tiny-bert"))
