"""When the Hub cannot be reached (a refused endpoint, one that accepts and never answers, a proxy that
refuses), a hub id fails at once in one line saying so: the hub client's five retries (26-77 s), its
WARNING line per try and its unbounded wait on a silent server are never reached, because ifqa asks once
with a bounded request (``ifqa.hub_reach``) and turns the client offline before it loads
(``models.loading``, the ``datasets`` gate)."""

from __future__ import annotations

import os
import socket
import time

import pytest

import ifqa.hub_reach as hub_reach
from ifqa.errors import IfqaError
from ifqa.hub_reach import offline_if_unreachable, unreachable
from ifqa.models import loading


@pytest.fixture
def no_hub(tmp_path, monkeypatch):
    """A Hub endpoint that refuses connections, an empty cache, and the client not told to stay offline."""
    env = {"HF_ENDPOINT": "http://127.0.0.1:9", "HF_HOME": str(tmp_path / "hf"), "IFQA_CACHE_DIR": str(tmp_path / "c")}
    proxies = (
        "HTTPS_PROXY",
        "https_proxy",
        "HTTP_PROXY",
        "http_proxy",
        "ALL_PROXY",
        "all_proxy",
        "NO_PROXY",
        "no_proxy",
    )
    for name in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_DATASETS_OFFLINE", *proxies):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    unreachable.cache_clear()
    yield env
    unreachable.cache_clear()


@pytest.fixture
def silent():
    """A port that accepts connections (the kernel's backlog) and never answers."""
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(8)
        yield f"http://127.0.0.1:{server.getsockname()[1]}"


def test_the_reason_names_the_endpoint_the_silence_or_the_proxy(no_hub, monkeypatch, silent):
    assert unreachable().startswith("127.0.0.1:")
    unreachable.cache_clear()
    monkeypatch.setenv("HF_ENDPOINT", silent)
    started = time.monotonic()
    assert unreachable(0.5).endswith("no answer in 0.5 s")
    assert time.monotonic() - started < 3  # bounded, whatever the server does
    unreachable.cache_clear()
    monkeypatch.delenv("HF_ENDPOINT")
    monkeypatch.setenv("HTTPS_PROXY", "http://user:secret@127.0.0.1:9")
    reason = unreachable()
    assert reason.startswith("the proxy http://") and "127.0.0.1:9" in reason and "secret" not in reason, reason


def test_a_hub_id_fails_at_once_naming_the_unreachable_hub(no_hub):
    import huggingface_hub.constants as constants

    saved = constants.HF_HUB_OFFLINE
    try:
        with pytest.raises(IfqaError, match="the Hub cannot be reached: 127.0.0.1"), loading("someone/model", "model"):
            assert constants.HF_HUB_OFFLINE  # the client is offline before the library asks it for a file
            from transformers import AutoConfig

            AutoConfig.from_pretrained("someone/model")
    finally:
        constants.HF_HUB_OFFLINE = saved


COMMANDS = [
    ["index", "dense", "--corpus", "{tmp}/p.jsonl", "-o", "{tmp}/idx", "--encoder", "someone/encoder"],
    ["read", "llm", "--backend", "hf", "--model", "someone/lm", "--setting", "demo", "--mode", "qa"]
    + ["--demos", "0", "-o", "{tmp}/pred.jsonl"],
    ["rerank", "--run", "{tmp}/run.jsonl", "--model", "someone/cross-encoder", "-o", "{tmp}/rr.jsonl"],
    ["train", "llm", "--model", "someone/lm", "--run", "{tmp}/run.jsonl", "-o", "{tmp}/trained"],
    ["index", "bm25", "--corpus", "hf:someone/passages", "-o", "{tmp}/bm25"],
    ["retrieve", "--questions", "hf:someone/questions", "--k", "2", "-o", "{tmp}/retrieved.jsonl"],
]


@pytest.mark.slow
@pytest.mark.parametrize("network", ["refused", "silent", "proxy refused"])
@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: " ".join(c[:2]))
def test_every_command_that_loads_from_the_hub_says_so_in_one_line_at_once(
    cli, tmp_path, no_hub, monkeypatch, silent, network, command
):
    monkeypatch.setattr(hub_reach, "REACH_TIMEOUT", 1.0)
    if network == "silent":
        monkeypatch.setenv("HF_ENDPOINT", silent)
    elif network == "proxy refused":
        monkeypatch.delenv("HF_ENDPOINT")
        monkeypatch.setenv("HTTPS_PROXY", "http://127.0.0.1:9")
    (tmp_path / "p.jsonl").write_text('{"id": "p1", "title": "T", "text": "a river"}\n')
    run = ["--setting", "demo", "--split", "train", "--k", "2", "-o", tmp_path / "run.jsonl", "--no-progress"]
    cli("retrieve", *run, env=dict(os.environ))  # a run to train and rerank on, and the demo index built
    started = time.monotonic()
    result = cli(*(part.format(tmp=tmp_path) for part in command), "--no-progress", env=dict(os.environ))
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 1 and len(lines) == 1, result.stderr  # no client WARNING, no retry
    assert "cannot be reached" in lines[0] or "while offline" in lines[0], lines[0]
    assert network != "proxy refused" or "proxy http://127.0.0.1:9" in lines[0], lines[0]
    assert time.monotonic() - started < 30
    made = ("idx", "pred", "rr", "trained", "bm25", "retrieved")
    assert not any(path.name.startswith(made) for path in tmp_path.iterdir())


def test_offline_already_nothing_is_asked(no_hub, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert offline_if_unreachable() is None
