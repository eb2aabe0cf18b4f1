"""The cache's location in a container whose user has no home (HOME unset, no passwd entry)."""

import os
from pathlib import Path

import pytest

from ifqa.errors import IfqaError
from ifqa.paths import cache_dir


@pytest.fixture
def homeless(monkeypatch):
    for name in ("HOME", "IFQA_CACHE_DIR", "XDG_CACHE_HOME"):
        monkeypatch.delenv(name, raising=False)

    def no_home(*args):
        raise RuntimeError("Could not determine home directory.")

    monkeypatch.setattr(Path, "home", classmethod(no_home))


def test_without_a_home_the_cache_must_be_named(homeless, monkeypatch, tmp_path):
    with pytest.raises(IfqaError, match="set IFQA_CACHE_DIR"):
        cache_dir()
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache_dir() == tmp_path / "xdg" / "ifqa"
    monkeypatch.setenv("IFQA_CACHE_DIR", str(tmp_path / "mine"))
    assert cache_dir() == tmp_path / "mine"


def test_a_command_without_a_home_is_one_line(homeless, cli, tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("HOME", "IFQA_CACHE_DIR", "XDG_CACHE_HOME")}
    result = cli("retrieve", "--k", "3", "-o", tmp_path / "run.jsonl", "--no-progress", env=env)
    assert result.returncode == 1 and result.stderr.count("\n") == 1 and "IFQA_CACHE_DIR" in result.stderr
    assert not (tmp_path / "run.jsonl").exists()
    env["XDG_CACHE_HOME"] = str(tmp_path / "xdg")
    result = cli("retrieve", "--k", "3", "-o", tmp_path / "run.jsonl", "--no-progress", env=env)
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "xdg" / "ifqa").is_dir()
