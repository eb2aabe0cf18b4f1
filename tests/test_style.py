"""The tree is kept clean under the formatter and linter configured in pyproject.toml (ruff)."""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _ruff(*args: str) -> subprocess.CompletedProcess:
    ruff = shutil.which("ruff", path=str(Path(sys.executable).parent)) or shutil.which("ruff")
    if ruff is None:
        pytest.skip("ruff is not installed (pip install -e '.[dev]')")
    return subprocess.run(
        [ruff, *args, "--no-cache", "ifqa", "tests", "benchmarks"], cwd=ROOT, capture_output=True, text=True
    )


def test_the_linter_finds_nothing():
    result = _ruff("check")
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-1000:]


def test_the_formatter_changes_nothing():
    result = _ruff("format", "--check")
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-1000:]
