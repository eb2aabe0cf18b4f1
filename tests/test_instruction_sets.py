"""The suite holds on any x86 CPU, not only on the one CI has: the tests that compare numbers
(marked ``numerics``: training, FiD, distributed, dense encoding, reranking; not the ONNX Runtime and
OpenVINO exports, whose kernels these variables do not limit) run again with torch and
oneDNN limited to each instruction set below this CPU's own (``ATEN_CPU_CAPABILITY``,
``ONEDNN_MAX_CPU_ISA``), so a tolerance that only this CPU's rounding meets turns the suite red here.

The levels are read off the CPU: asking for one it lacks is an illegal instruction, not a limit."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
ONEDNN = {"default": "SSE41", "avx2": "AVX2", "avx512": "AVX512_CORE"}


def cpu_levels() -> list[str]:
    """torch's kernel levels this CPU runs that ifqa supports, lowest first (its own, the default
    run's, last): AVX2 and AVX-512 (AMX CPUs run AVX-512 kernels with AMX beside them). CPUs
    without AVX2 (x86-64 before 2013) are not among the machines ifqa promises to hold on, so the
    SSE-only level is run only where it is the CPU's own."""
    try:
        flags = set(Path("/proc/cpuinfo").read_text().split())
    except OSError:
        return ["default"]
    if not {"avx2", "fma"} <= flags:
        return ["default"]
    levels = ["avx2"]
    if {"avx512f", "avx512bw", "avx512vl", "avx512dq"} <= flags:
        levels.append("avx512")
    return levels


def numerics_files() -> list[str]:
    """The test modules holding a ``numerics`` test (read from their text: no import)."""
    return sorted(
        str(path.relative_to(ROOT))
        for path in (ROOT / "tests").rglob("test_*.py")
        if "mark.numerics" in path.read_text()
    )


@pytest.mark.numerics
def test_the_instruction_set_asked_for_is_the_one_running():
    import torch

    asked = os.environ.get("ATEN_CPU_CAPABILITY")
    if not asked:
        pytest.skip("runs inside the instruction-set runs below")
    assert torch.backends.cpu.get_cpu_capability() == asked.upper()


def test_the_numerics_tests_are_found():
    files = numerics_files()
    assert {"tests/training/test_reranker.py", "tests/readers/test_fid.py", "tests/retrieval/test_dense.py"} <= set(
        files
    )
    assert "tests/test_distributed.py" in files


@pytest.mark.slow
@pytest.mark.parametrize("level", cpu_levels()[:-1])
def test_numbers_hold_under_a_narrower_instruction_set(level):
    env = {**os.environ, "ATEN_CPU_CAPABILITY": level, "ONEDNN_MAX_CPU_ISA": ONEDNN[level]}
    command = [sys.executable, "-m", "pytest", "-q", "-n", "0", "-p", "no:cacheprovider", "-m", "numerics"]
    result = subprocess.run(
        [*command, *numerics_files()], cwd=ROOT, env=env, capture_output=True, text=True, timeout=900
    )
    tail = result.stdout[-4000:] + result.stderr[-2000:]
    assert result.returncode == 0, tail
    assert " passed" in result.stdout.splitlines()[-1] and " failed" not in result.stdout.splitlines()[-1], tail
