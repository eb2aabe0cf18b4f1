"""Shared test helpers: the CLI runner, the optional ../shared data, and a local HTTP server."""

from __future__ import annotations

import functools
import http.server
import json
import subprocess
import sys
import threading
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared" / "data"


def pytest_collection_modifyitems(config, items):
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
    """Run `ifqa ...` in a fresh interpreter, as a user would."""
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
