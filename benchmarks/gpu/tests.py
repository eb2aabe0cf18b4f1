"""The GPU tests (``pytest -m gpu``), as a section: the modules that hold one, without the project's
default options (a GPU machine may have no pytest-xdist) and without collecting the others (a GPU
machine may lack what they import: the page test's browser driver, the server's web framework)."""

from __future__ import annotations

import subprocess
import sys
import time

from common import ROOT

from gpu.suite import row

TEST_SECONDS = 120  # a GPU test still running after this dumps every thread's stack into the log
SECTION_SECONDS = 420  # the whole section's limit, so that a hang leaves time for the others
QUICK_SECONDS = 150  # its limit under --quick, whose every section shares one 8-minute call


def _text(data) -> str:
    return data.decode("utf-8", "replace") if isinstance(data, bytes) else (data or "")


def gpu_test_modules() -> list[str]:
    return sorted(
        str(path.relative_to(ROOT))
        for path in (ROOT / "tests").rglob("test_*.py")
        if "pytest.mark.gpu" in path.read_text(encoding="utf-8")
    )


def gpu_tests(suite) -> dict:
    """The GPU tests' summary and failures; their whole output goes to ``gpu-tests.log`` in the work folder."""
    started = time.time()
    limit = QUICK_SECONDS if suite.quick else SECTION_SECONDS
    line = [sys.executable, "-m", "pytest", "-o", "addopts=", "-m", "gpu", "-q", "-p", "no:cacheprovider", "-rfE"]
    line += ["-o", f"faulthandler_timeout={TEST_SECONDS}", *gpu_test_modules()]  # a hung test's stacks, dumped
    try:
        result = subprocess.run(line, cwd=ROOT, capture_output=True, text=True, timeout=limit)
        out, err = result.stdout, result.stderr
    except subprocess.TimeoutExpired as exc:
        out = _text(exc.stdout) + f"\nTIMED OUT after {limit} s (stacks above)\n"
        err = _text(exc.stderr)
    suite.work.new("gpu-tests.log").write_text(out + err, encoding="utf-8")
    lines = out.strip().splitlines() or ["no output"]
    failures = [line for line in lines if line.startswith(("FAILED", "ERROR"))]
    return {
        **row("GPU tests (`pytest -m gpu`)", None, ""),
        "ifqa": "; ".join([lines[-1].strip("= "), *failures])[:1500],
        "seconds": f"{time.time() - started:.1f}",
    }
