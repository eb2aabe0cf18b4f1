"""When the Hub cannot be reached, a hub id fails at once in one line saying so (trust round 9): the
hub client's five retries (26-77 s) and its WARNING line per try are never reached, because ifqa asks
once (``ifqa.hub_reach``) and turns the client offline before it loads (``models.loading``, the
``datasets`` gate)."""

from __future__ import annotations

import os

import pytest

from ifqa.errors import IfqaError
from ifqa.hub_reach import offline_if_unreachable, unreachable
from ifqa.models import loading


@pytest.fixture
def no_hub(tmp_path, monkeypatch):
    """A Hub endpoint that refuses connections, an empty cache, and the client not told to stay offline."""
    env = {"HF_ENDPOINT": "http://127.0.0.1:9", "HF_HOME": str(tmp_path / "hf"), "IFQA_CACHE_DIR": str(tmp_path / "c")}
    for name in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_DATASETS_OFFLINE", "HTTPS_PROXY", "https_proxy"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    unreachable.cache_clear()
    yield env
    unreachable.cache_clear()


def test_the_reason_names_the_endpoint_and_a_proxy_is_left_to_the_client(no_hub, monkeypatch):
    assert unreachable().startswith("127.0.0.1:")
    unreachable.cache_clear()
    monkeypatch.setenv("HTTPS_PROXY", "http://127.0.0.1:9")
    assert unreachable() is None  # only the client can try through a proxy


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


@pytest.mark.parametrize(
    "command",
    [
        ["index", "dense", "--corpus", "{tmp}/p.jsonl", "-o", "{tmp}/idx", "--encoder", "someone/encoder"],
        ["read", "llm", "--backend", "hf", "--model", "someone/lm", "--setting", "demo", "--mode", "qa"]
        + ["--demos", "0", "-o", "{tmp}/pred.jsonl"],
        ["rerank", "--run", "{tmp}/run.jsonl", "--model", "someone/cross-encoder", "-o", "{tmp}/rr.jsonl"],
        ["index", "bm25", "--corpus", "hf:someone/passages", "-o", "{tmp}/bm25"],
    ],
    ids=lambda c: " ".join(c[:2]),
)
def test_every_command_that_loads_from_the_hub_says_so_in_one_line_at_once(cli, tmp_path, no_hub, command):
    (tmp_path / "p.jsonl").write_text('{"id": "p1", "title": "T", "text": "a river"}\n')
    if "{tmp}/run.jsonl" in command:
        cli("retrieve", "--setting", "demo", "--k", "2", "-o", tmp_path / "run.jsonl", "--no-progress")
    result = cli(*(part.format(tmp=tmp_path) for part in command), "--no-progress", env=dict(os.environ))
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 1 and len(lines) == 1, result.stderr  # no client WARNING, no retry
    assert "cannot be reached" in lines[0] or "while offline" in lines[0], lines[0]
    assert not any(path.name.startswith(("idx", "pred", "rr", "bm25")) for path in tmp_path.iterdir())


def test_offline_already_nothing_is_asked(no_hub, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert offline_if_unreachable() is None
