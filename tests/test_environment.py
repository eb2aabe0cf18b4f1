"""Every ``IFQA_*`` variable ifqa reads is declared in ``ifqa/environment.py`` and checked where a command
starts, on every device (issue #77: ``IFQA_FEED_WORKERS=abc`` went without a word on a CPU)."""

from __future__ import annotations

import ast
import os
import re
from pathlib import Path

import pytest

from ifqa.environment import VARIABLES

PACKAGE = Path(__file__).resolve().parents[1] / "ifqa"
#: a value each kind of check refuses, beside the empty value every one refuses
BAD = {"_count": ["abc", "-1", ""], "_seconds": ["0", "nan", ""], "_dist_backend": ["mpi", ""], "_location": ["", " "]}


def _read_names() -> set[str]:
    """The IFQA_* names the package's code reads: string constants that are a variable's name."""
    names = set()
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (
                isinstance(node, ast.Constant)
                and isinstance(node.value, str)
                and re.fullmatch(r"IFQA_[A-Z_]+", node.value)
            ):
                names.add(node.value)
    return names


def test_every_variable_the_package_reads_is_declared():
    assert _read_names() <= set(VARIABLES) and "IFQA_FEED_WORKERS" in _read_names()


CASES = [(name, value) for name, check in VARIABLES.items() for value in BAD[check.__name__]]


@pytest.mark.parametrize("name, value", CASES)
def test_a_bad_value_is_one_line_before_any_work_on_a_cpu(cli, tmp_path, name, value):
    run = tmp_path / "run.jsonl"
    result = cli("evaluate", "--run", run, env={**os.environ, name: value})
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert result.returncode == 1 and len(lines) == 1 and f"{name}={value!r}" in lines[0], result.stderr


def test_good_values_pass_and_help_reads_none(cli, tmp_path):
    good = {"IFQA_FEED_WORKERS": "0", "IFQA_DIST_TIMEOUT": "30", "IFQA_DIST_BACKEND": "gloo"}
    assert cli("evaluate", "--help", env={**os.environ, "IFQA_FEED_WORKERS": "abc"}).returncode == 0
    result = cli("evaluate", "--run", tmp_path / "run.jsonl", env={**os.environ, **good})
    assert result.returncode == 1 and "IFQA_" not in result.stderr and "run.jsonl" in result.stderr


def test_the_users_own_variables_never_steer_a_test(tmp_path):
    """Run with a researcher's ``IFQA_FEED_WORKERS=2`` (and a data folder of theirs), a test of the CPU's
    default feed failed: the test run clears every declared variable first (tests/conftest.py)."""
    import subprocess
    import sys

    root = PACKAGE.parent
    test = "tests/test_feeding.py::test_without_workers_a_gpu_is_fed_by_threads_ahead_pinned_and_in_order"
    env = {**os.environ, "IFQA_FEED_WORKERS": "2", "IFQA_DATA_DIR": str(tmp_path / "theirs")}
    command = [sys.executable, "-m", "pytest", "-q", "-n", "0", "-p", "no:cacheprovider", test]
    result = subprocess.run(command, cwd=root, env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0 and "1 passed" in result.stdout, result.stdout[-2000:]
