"""Real `ifqa serve` processes on 127.0.0.1, and a small JSON client for them."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")

from tests.readers.fake_openai import FakeOpenAI  # noqa: E402

#: Demo dev questions (ifqa/demo) and what the fake model answers to them.
ANSWERS = {
    "If the Gulf of Mexico dried up, which U.S. state would still border Alabama to the south?": "Florida",
    "If Aristotle had joined Plato's Academy two years later than he did, at what age would he have joined?": "20",
    "If George Gershwin had written An American in Paris ten years later, in what year would it have been written?": "1938",
}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Server:
    """One `ifqa serve` process; stopped when the test module ends."""

    def __init__(self, args: list[str], log: Path):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = log
        env = {**os.environ, "OPENAI_API_KEY": "test-key"}
        self.process = subprocess.Popen(
            [sys.executable, "-m", "ifqa.cli", "serve", "--port", str(self.port), *args],
            stdout=log.open("w"),
            stderr=subprocess.STDOUT,
            env=env,
        )
        deadline = time.time() + 120
        while time.time() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"ifqa serve exited: {log.read_text()}")
            try:
                self.get("/health")
                return
            except (urllib.error.URLError, ConnectionError):
                time.sleep(0.3)
        raise RuntimeError(f"ifqa serve did not start: {log.read_text()}")

    def get(self, path: str) -> dict:
        with urllib.request.urlopen(self.url + path, timeout=60) as response:
            return json.loads(response.read())

    def post(self, path: str, body, raw: bytes | None = None) -> tuple[int, dict]:
        data = raw if raw is not None else json.dumps(body).encode()
        request = urllib.request.Request(self.url + path, data=data, headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=60) as response:
                return response.status, json.loads(response.read())
        except urllib.error.HTTPError as error:
            return error.code, json.loads(error.read())

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.process.kill()


@pytest.fixture(scope="module")
def fake_llm():
    with FakeOpenAI(ANSWERS) as fake:
        yield fake


@pytest.fixture(scope="module")
def reader_server(fake_llm, tmp_path_factory):
    """The demo index with an LLM reader (open-book, answers from the fake OpenAI-protocol server)."""
    folder = tmp_path_factory.mktemp("serve")
    server = Server(
        [
            "--model",
            "fake-model",
            "--base-url",
            fake_llm.url,
            "--cache",
            str(folder / "cache.sqlite"),
            "--retries",
            "0",
            "--timeout",
            "5",
            "--demos",
            "2",
        ],
        folder / "server.log",
    )
    yield server
    server.stop()


@pytest.fixture(scope="module")
def search_server(tmp_path_factory):
    """The demo index and no reader."""
    folder = tmp_path_factory.mktemp("serve-search")
    server = Server(["--max-k", "30"], folder / "server.log")
    yield server
    server.stop()


@pytest.fixture(scope="module")
def rerank_server(tmp_path_factory):
    """The demo index reranked by a question-agnostic control trained on the demo set (a fast reranker)."""
    from tests.conftest import run_cli

    folder = tmp_path_factory.mktemp("serve-rerank")
    trained = run_cli(
        "train", "--control", "--index", "demo:bm25", "--setting", "demo", "--no-progress", "-o", folder / "control"
    )
    assert trained.returncode == 0, trained.stderr
    server = Server(["--rerank", str(folder / "control" / "model"), "--rerank-depth", "20"], folder / "server.log")
    server.model = folder / "control" / "model"
    yield server
    server.stop()
