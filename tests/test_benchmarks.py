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


def test_gpu_suite_without_cuda_says_so_in_one_line():
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    result = subprocess.run([sys.executable, str(BENCHMARKS / "gpu_suite.py")], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0 and result.stdout.strip() == "gpu_suite: no CUDA device here; nothing measured"


@pytest.mark.slow
def test_gpu_suite_measures_every_path_at_smoke_sizes(tmp_path):
    """The suite's own plumbing, on the CPU at toy sizes: every row measured, none 'not measured'."""
    out = tmp_path / "suite.md"
    result = subprocess.run([sys.executable, str(BENCHMARKS / "gpu_suite.py"), "--smoke", "--out", str(out)],
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    table = out.read_text()
    assert "not measured" not in table, table
    for path in ("FiD training", "`ifqa train fid`", "FiD reading", "`ifqa index dense`", "`ifqa rerank`",
                 "reranker training", "`ifqa serve --rerank`"):
        assert path in table
