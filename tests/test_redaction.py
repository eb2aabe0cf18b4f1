"""Secrets never reach a message: every error line of every command and every log record passes
through ``ifqa.redact``; here secrets are fed through each kind of path."""

import json
import logging
import os

import pytest

from ifqa.redact import RedactingFilter, add_secret, redact, redact_url
from tests.conftest import run_cli
from tests.readers.fake_openai import FakeOpenAI

SECRET = "SECRETKEY-0123456789"


@pytest.mark.parametrize(
    "text",
    [
        f"http://user:{SECRET}@host:8000/v1 refused",
        f"GET https://host/v1/chat?api-key={SECRET}&x=1: 500",
        f"Authorization: Bearer {SECRET}",
        f'{{"error": "bad api_key={SECRET}"}}',
        f"password: {SECRET}",
        "Incorrect API key provided: sk-proj-abcdefghijklmnopqrstuvwxyz.",
    ],
)
def test_text_paths(text):
    clean = redact(text)
    assert SECRET not in clean and "abcdefghijklmnop" not in clean and "***" in clean


def test_known_values_urls_and_punctuation(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "plainvalue99")
    add_secret("given-on-the-command-line")
    assert redact("the server said plainvalue99 and given-on-the-command-line") == "the server said *** and ***"
    assert redact_url(f"http://u:{SECRET}@h/p?a={SECRET}") == "http://***@h/p?a=***"
    assert redact("see https://example.org/path.") == "see https://example.org/path."
    assert redact("short ab") == "short ab"


def test_log_records_are_redacted():
    record = logging.LogRecord("x", logging.INFO, __file__, 1, "calling %s", (f"http://h/?key={SECRET}",), None)
    RedactingFilter().filter(record)
    assert SECRET not in record.getMessage()


def test_a_401_quoting_the_key_is_one_redacted_line(tmp_path):
    questions = tmp_path / "q.json"
    questions.write_text(json.dumps([{"idx": 1, "question": "If rivers ran uphill, what then?", "answers": ["x"]}]))
    with FakeOpenAI({}) as server:
        server.failures = ["401"] * 10
        env = {**os.environ, "IFQA_CACHE_DIR": str(tmp_path / "cache"), "OPENAI_API_KEY": SECRET}
        result = run_cli(
            "read",
            "llm",
            "--model",
            "m",
            "--demos",
            "0",
            "--no-cache",
            "--no-progress",
            "--base-url",
            server.url,
            "--questions",
            questions,
            "-o",
            tmp_path / "p.jsonl",
            env=env,
        )
    assert result.returncode == 1 and "HTTP 401" in result.stderr and "Incorrect API key provided: ***" in result.stderr
    assert SECRET not in result.stderr + result.stdout and len(result.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "p.jsonl").exists()


def test_a_query_string_in_the_base_url_is_sent_as_a_query(tmp_path):
    """?api-version=... belongs on every request, not glued into the path (/v1?x=1chat/completions)."""
    questions = tmp_path / "q.json"
    questions.write_text(json.dumps([{"idx": 1, "question": "If rivers ran uphill, what then?", "answers": ["x"]}]))
    with FakeOpenAI({"If rivers ran uphill, what then?": "x"}) as server:
        env = {**os.environ, "IFQA_CACHE_DIR": str(tmp_path / "cache")}
        result = run_cli(
            "read",
            "llm",
            "--model",
            "m",
            "--demos",
            "0",
            "--no-cache",
            "--no-progress",
            "--base-url",
            f"{server.url}?api-version=2024-01",
            "--questions",
            questions,
            "-o",
            tmp_path / "p.jsonl",
            env=env,
        )
    assert result.returncode == 0, result.stderr
    assert server.paths and all(
        path.startswith("/v1/chat/completions?") and "api-version=2024-01" in path for path in server.paths
    )


@pytest.mark.parametrize("where", ["user", "query", "api-key"])
def test_a_key_the_server_quotes_back_is_redacted_wherever_it_was_given(tmp_path, where):
    """The key given in the endpoint's user part or query, or with --api-key, and the Basic header
    made from a user part, never appear, though the server's 401 quotes them all."""
    import base64

    questions = tmp_path / "q.json"
    questions.write_text(json.dumps([{"idx": 1, "question": "If rivers ran uphill, what then?", "answers": ["x"]}]))
    with FakeOpenAI({}) as server:
        server.failures = ["401"] * 10
        url = {
            "user": server.url.replace("http://", f"http://u:{SECRET}@"),
            "query": f"{server.url}?api-key={SECRET}",
            "api-key": server.url,
        }[where]
        extra = ["--api-key", "sk-proj-" + SECRET] if where == "api-key" else []
        result = run_cli(
            "read",
            "llm",
            "--model",
            "m",
            "--demos",
            "0",
            "--no-cache",
            "--no-progress",
            "--base-url",
            url,
            *extra,
            "--questions",
            questions,
            "-o",
            tmp_path / "p.jsonl",
            env={**os.environ, "IFQA_CACHE_DIR": str(tmp_path / "cache"), "OPENAI_API_KEY": "unused-key-0"},
        )
    basic = base64.b64encode(f"u:{SECRET}".encode()).decode()
    assert result.returncode == 1 and "HTTP 401" in result.stderr and len(result.stderr.strip().splitlines()) == 1
    for secret in (SECRET, basic, "0123456789"):
        assert secret not in result.stderr + result.stdout


def test_basic_credentials_and_fragments_are_redacted():
    assert redact("header: Basic dTpTRUNSRVRLRVkxMjM=") == "header: Basic ***"
    assert redact_url("http://h/x#SECRETKEY") == "http://h/x#***"
    add_secret("SECRET123")
    assert redact("key sk-proj-SECRET123abcdefABCDEF") == "key sk-***"
