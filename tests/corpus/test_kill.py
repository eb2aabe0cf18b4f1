"""SIGKILL during `ifqa corpus build --workers 2`: the workers die with the parent, and rerunning
the command resumes to the same output as an uninterrupted build."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # worker processes started, killed and started again


def _children(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == pid:
                found.append(int(entry.name))
    return found


def _alive(pid: int) -> bool:
    try:
        state = (Path("/proc") / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
@pytest.mark.heavy  # 34 s; the corpus build's last-second kills (test_kill_last_second) run by default
def test_sigkill_kills_workers_and_the_rerun_resumes(tmp_path):
    articles = tmp_path / "articles.json"
    words = " ".join(f"w{i}" for i in range(400))
    with articles.open("w") as handle:
        for i in range(40_000):
            handle.write(json.dumps({"id": str(i), "url": "u", "title": f"T{i}", "text": f"Para {i}. {words}"}) + "\n")
    command = [
        sys.executable,
        "-m",
        "ifqa.cli",
        "corpus",
        "build",
        str(articles),
        "--workers",
        "2",
        "--no-progress",
        "--batch-size",
        "50",
    ]
    reference = tmp_path / "reference.jsonl"
    assert subprocess.run(command + ["-o", str(reference)], capture_output=True).returncode == 0
    out = tmp_path / "out.jsonl"
    process = subprocess.Popen(command + ["-o", str(out)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 60
    workers: list[int] = []
    while time.time() < deadline and len(workers) < 2:
        workers = _children(process.pid)
        time.sleep(0.05)
    assert len(workers) >= 2, "the build finished before it could be killed"
    time.sleep(0.5)
    os.kill(process.pid, signal.SIGKILL)
    process.wait()
    deadline = time.time() + 10
    while time.time() < deadline and any(_alive(w) for w in workers):
        time.sleep(0.1)
    assert not any(_alive(w) for w in workers), "workers outlived their killed parent"
    assert not out.exists()
    assert subprocess.run(command + ["-o", str(out)], capture_output=True).returncode == 0
    assert out.read_bytes() == reference.read_bytes()
