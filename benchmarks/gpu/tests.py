"""The GPU tests (``pytest -m gpu``), as a section."""

from __future__ import annotations

import subprocess
import sys
import time

from common import ROOT

from gpu.suite import row


def gpu_tests() -> dict:
    started = time.time()
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-m", "gpu", "-q", "-p", "no:cacheprovider", "tests"],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    summary = (result.stdout.strip().splitlines() or ["no output"])[-1]
    return {
        **row("GPU tests (`pytest -m gpu`)", None, ""),
        "ifqa": summary.strip("= "),
        "seconds": f"{time.time() - started:.1f}",
    }
