"""Every benchmark script imports and answers ``--help``: an import error cannot land unnoticed
(benchmarks/fid_throughput.py once imported a name that had moved)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"
SCRIPTS = sorted(p for p in BENCHMARKS.glob("*.py") if p.name != "common.py")


def test_every_script_is_listed():
    assert len(SCRIPTS) >= 10


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.name)
def test_help(script):
    result = subprocess.run([sys.executable, str(script), "--help"], capture_output=True, text=True, timeout=120,
                            cwd=BENCHMARKS)
    assert result.returncode == 0, result.stderr[-2000:]
    assert "usage:" in result.stdout
