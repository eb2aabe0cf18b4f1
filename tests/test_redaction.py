"""Secrets never reach a message: every error line of every command and every log record passes
through ``ifqa.redact``; here secrets are fed through each kind of path."""

import json
import logging
import os
import string
from urllib.parse import quote, quote_plus

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ifqa.errors import IfqaError
from ifqa.redact import RedactingFilter, add_secret, redact, redact_url
from tests.conftest import run_cli
from tests.in_process import no_known_secrets
from tests.readers.fake_openai import FakeOpenAI

SECRET = "SECRETKEY-0123456789"


@pytest.fixture(scope="module", autouse=True)
def _redactor_knows_no_secret():
    """Start from what a new process knows (an earlier test in this worker may have built an LLM
    backend, which registers its key for the process's lifetime)."""
    with no_known_secrets():
        yield


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


# --- secrets of any shape: a property over keys, then each sink a message reaches ---------------

KEYS = st.text(alphabet=string.printable, min_size=1, max_size=200)


def _leaks(key: str, text: str) -> list[str]:
    """The pieces of ``key`` (whole, URL-encoded, or a run of 8 of it) that ``text`` still shows."""
    pieces = {key, quote(key, safe=""), quote_plus(key)}
    pieces |= {key[i : i + 8] for i in range(len(key) - 7)}
    return [piece for piece in pieces if piece in text]


@settings(max_examples=300, deadline=None)
@given(key=KEYS, cut=st.integers(min_value=8, max_value=200), shape=st.sampled_from(["whole", "cut", "url"]))
def test_a_configured_key_of_any_length_and_characters_is_never_shown(key, cut, shape):
    quoted = {"whole": key, "cut": key[:cut], "url": quote(key, safe="")}[shape]
    if shape == "cut" and len(quoted) < 8:
        quoted = key  # a cut shorter than 8 characters is too short to know; only the whole key is
    message = f"Incorrect API key provided: {quoted}. See https://docs.example/keys."
    clean = redact(message, secrets=[key], from_endpoint=True)
    assert not _leaks(key, clean), (message, clean)
    assert "Incorrect API key provided" in clean or len(key) < 8  # a long key blanks no words of ours


@settings(max_examples=100, deadline=None)
@given(key=KEYS)
def test_an_error_raised_anywhere_is_redacted(key):
    """IfqaError's text (what the CLI prints, the API raises, the server's error body carries) and
    a log record are redacted once, at the source, for a long key in any of its spellings."""
    if len(key) < 8:
        key = (key * 8)[:8]
    add_secret(key)
    try:
        error = IfqaError(f"the server said: {key} / {quote(key, safe='')}", "http://host/v1")
        record = logging.LogRecord("x", logging.INFO, __file__, 1, "said %s", (key,), None)
        RedactingFilter().filter(record)
        assert not _leaks(key, str(error)) and not _leaks(key, record.getMessage())
    finally:
        _forget(key)


def test_a_credential_in_an_environment_variable_of_any_name_is_redacted(monkeypatch):
    monkeypatch.setenv("MY_SERVICE_TOKEN", "abcd$:efgh-1234")
    monkeypatch.setenv("ACME_API_KEY", "kx$:9")  # five characters, from an endpoint only
    assert redact("sent abcd$:efgh-1234 and abcd$:efgh") == "sent *** and ***"
    assert redact("the server quoted kx$:9", from_endpoint=True) == "the server quoted ***"
    assert redact("our own words: kx$:9 stays, as short keys would blank words") == (
        "our own words: kx$:9 stays, as short keys would blank words"
    )


def _forget(key: str) -> None:
    from ifqa import redact as module

    module._secrets.discard(key)


@pytest.mark.parametrize(
    "key, quote_back, via",
    [
        ("k$:y5", lambda key: key, "--api-key"),  # five characters holding $ and :
        ("Zq7-pL0vRt2mW9xB4nKs", lambda key: key[:10] + "...", "env"),  # quoted back cut to its head
        ("w0rd=?&", lambda key: quote(key, safe=""), "--api-key"),  # URL-encoded by the server
    ],
)
def test_a_key_the_server_quotes_back_in_any_shape_never_reaches_the_terminal(tmp_path, key, quote_back, via):
    questions = tmp_path / "q.json"
    questions.write_text(json.dumps([{"idx": 1, "question": "If rivers ran uphill, what then?", "answers": ["x"]}]))
    with FakeOpenAI({}) as server:
        server.failures, server.quote_back = ["401"] * 10, quote_back
        extra = ["--api-key", key] if via == "--api-key" else []
        env = {**os.environ, "IFQA_CACHE_DIR": str(tmp_path / "cache"), "OPENAI_API_KEY": key}
        result = run_cli(
            "read", "llm", "--model", "m", "--demos", "0", "--no-cache", "--no-progress",
            "--base-url", server.url, *extra, "--questions", questions, "-o", tmp_path / "p.jsonl", env=env,
        )  # fmt: skip
    assert result.returncode == 1 and "HTTP 401" in result.stderr, result.stderr
    assert "Incorrect API key provided" in result.stderr
    assert key not in result.stderr + result.stdout and quote(key, safe="") not in result.stderr
    assert not _leaks(key, result.stderr + result.stdout) or len(key) < 8
