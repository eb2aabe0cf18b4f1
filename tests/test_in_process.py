"""The in-process runner most CLI tests use answers as a fresh interpreter does: same exit status,
same stdout and stderr, for output, one-line errors, usage errors, help and native writes."""

import os

import pytest

from tests.conftest import run_cli, run_cli_process


@pytest.mark.parametrize(
    "args",
    [
        ["--version"],
        ["data", "stats", "--setting", "demo", "--json"],
        ["evaluate", "--predictions", "no-such-file.jsonl", "--setting", "demo"],
        ["retrieve", "--k", "0"],
        ["retrieve", "--no-such-flag"],
        ["train"],
    ],
    ids=" ".join,
)
def test_same_answer_as_a_new_process(args, tmp_path):
    env = {**os.environ, "IFQA_CACHE_DIR": str(tmp_path / "cache")}
    inside, outside = run_cli(*args, cwd=tmp_path, env=env), run_cli_process(*args, cwd=tmp_path, env=env)
    assert (inside.returncode, inside.stdout, inside.stderr) == (outside.returncode, outside.stdout, outside.stderr)


def test_the_call_sees_its_own_environment_and_folder_and_leaves_ours(tmp_path):
    before = dict(os.environ), os.getcwd()
    env = {**os.environ, "IFQA_CACHE_DIR": str(tmp_path / "elsewhere")}
    result = run_cli("index", "bm25", "--corpus", "nothing.jsonl", "-o", "idx", cwd=tmp_path, env=env)
    assert result.returncode == 1 and "nothing.jsonl" in result.stderr
    assert (dict(os.environ), os.getcwd()) == before


def test_native_writes_and_warnings_are_captured(monkeypatch):
    """Output written to file descriptor 2 by native code, and a warning, land in the call's stderr
    (a fresh interpreter shows both)."""
    import warnings

    import ifqa.cli

    def noisy(argv):
        os.write(2, b"native line\n")
        warnings.warn("a library's warning", UserWarning, stacklevel=1)
        raise SystemExit(3)

    monkeypatch.setattr(ifqa.cli, "main", noisy)
    result = run_cli("anything")
    assert result.returncode == 3
    assert "native line" in result.stderr and "UserWarning: a library's warning" in result.stderr
