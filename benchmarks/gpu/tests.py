"""The GPU tests (``pytest -m gpu``), as a section: the modules that hold one, without the project's
default options (a GPU machine may have no pytest-xdist) and without collecting the others (a GPU
machine may lack what they import: the page test's browser driver, the server's web framework)."""

from __future__ import annotations

import subprocess
import sys
import time

from common import ROOT

from gpu.suite import row


def gpu_test_modules() -> list[str]:
    return sorted(
        str(path.relative_to(ROOT))
        for path in (ROOT / "tests").rglob("test_*.py")
        if "pytest.mark.gpu" in path.read_text(encoding="utf-8")
    )


def gpu_tests(suite) -> dict:
    """The GPU tests' summary and failures; their whole output goes to ``gpu-tests.log`` in the work folder."""
    started = time.time()
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-o", "addopts=", "-m", "gpu", "-q", "-p", "no:cacheprovider", "-rfE"]
        + gpu_test_modules(),
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    suite.work.new("gpu-tests.log").write_text(result.stdout + result.stderr, encoding="utf-8")
    lines = result.stdout.strip().splitlines() or ["no output"]
    failures = [line for line in lines if line.startswith(("FAILED", "ERROR"))]
    return {
        **row("GPU tests (`pytest -m gpu`)", None, ""),
        "ifqa": "; ".join([lines[-1].strip("= "), *failures])[:1500],
        "seconds": f"{time.time() - started:.1f}",
    }
