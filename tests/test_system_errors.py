"""What the machine refuses (trust round 6): a full disk, too few file handles, too little memory, each
one line saying what it is and what to do, from one place (errors.system_error_line, used by the
command line's error handler for every command)."""

import errno
import os
import resource
import signal
import subprocess
import sys
import time

import pytest

from ifqa.supervise import NATIVE_DEATHS

CASES = [
    (OSError(errno.ENOSPC, "No space left on device"), "is full"),
    (OSError("1227079 requested and 499680 written"), "is full"),  # numpy's short write
    (OSError(errno.EMFILE, "Too many open files"), "ulimit -n"),
    (MemoryError(), "out of memory"),
    (ImportError("libopenblaso-r0.so: failed to map segment from shared object"), "out of memory"),
    (
        RuntimeError("[enforce fail at alloc_cpu.cpp:117] data. DefaultCPUAllocator: can't allocate memory"),
        "--batch-size",
    ),
]


@pytest.mark.parametrize("error, expected", CASES, ids=[c[1] + " " + type(c[0]).__name__ for c in CASES])
def test_a_system_refusal_is_one_line_saying_what_to_do(cli, monkeypatch, tmp_path, error, expected):
    from ifqa.retrieval import bm25

    def refuse(*args, **kwargs):
        raise error

    monkeypatch.setattr(bm25, "build", refuse)
    corpus = tmp_path / "passages.jsonl"
    corpus.write_text('{"id": "p1", "title": "T", "text": "a river"}\n')
    result = cli("index", "bm25", "--corpus", corpus, "-o", tmp_path / "idx", "--engine", "bm25s", "--no-progress")
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 1 and len(lines) == 1 and "Traceback" not in result.stderr, result.stderr
    assert expected in lines[0]
    if expected == "is full":
        assert str(tmp_path / "idx") in lines[0]  # where, when the error names no file


def test_a_runtime_error_the_machine_did_not_cause_is_not_hidden(cli, monkeypatch, tmp_path):
    from ifqa.retrieval import bm25

    monkeypatch.setattr(bm25, "build", lambda *a, **k: (_ for _ in ()).throw(RuntimeError("a bug")))
    corpus = tmp_path / "passages.jsonl"
    corpus.write_text('{"id": "p1", "title": "T", "text": "a river"}\n')
    result = cli("index", "bm25", "--corpus", corpus, "-o", tmp_path / "idx", "--engine", "bm25s", "--no-progress")
    assert result.returncode == 1 and "Traceback" in result.stderr and "RuntimeError: a bug" in result.stderr


# --- an allocation that fails in a library's native code (trust round 9) -------------------------

#: The program, its command replaced by what the test needs the command to do (argv[1]).
PROGRAM = "import os, sys, time, ifqa.cli as c; c.main = lambda argv=None: ({}); c.run()"


def _under_limit(gib: float):
    """A child's address-space limit (``ulimit -v``), far above what a test's interpreter needs."""
    return lambda: resource.setrlimit(resource.RLIMIT_AS, (int(gib * 2**30), resource.RLIM_INFINITY))


def _program(body: str, limit: float | None = 16, **kwargs) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-c", PROGRAM.format(body)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=_under_limit(limit) if limit else None,
        **kwargs,
    )


@pytest.mark.parametrize("number", sorted(NATIVE_DEATHS), ids=lambda n: NATIVE_DEATHS[n])
def test_a_native_death_under_a_memory_limit_is_one_line_naming_memory(number):
    """faiss's extension segfaulting as it loads, Rust's allocator aborting: under ``ulimit -v`` each ends
    the command by a signal, and the program says, in one line, memory and what to lower: the library's own
    dying words (Rust's allocator writes one as it aborts) are not shown beside it."""
    dying = "os.write(2, b'memory allocation of 64 bytes failed\\n'), os.write(2, b'terminate called after throwing')"
    program = _program(f"({dying}, os.kill(os.getpid(), {int(number)}))")
    _, stderr = program.communicate(timeout=60)
    lines = stderr.strip().splitlines()
    assert program.returncode == 1 and len(lines) == 1, stderr
    assert lines[0].startswith("ifqa: error: out of memory") and NATIVE_DEATHS[number] in lines[0]
    assert "ulimit -v of 16.0 GiB" in lines[0] and "--batch-size" in lines[0] and "raise the limit" in lines[0]


def test_without_a_memory_limit_the_command_runs_in_the_program_itself():
    """No limit, no supervisor: the signal ends the program as it always did (allocations do not fail)."""
    program = _program(f"os.kill(os.getpid(), {int(signal.SIGSEGV)})", limit=None)
    program.communicate(timeout=60)
    assert program.returncode == -signal.SIGSEGV


def test_under_a_memory_limit_the_commands_own_lines_come_through_in_order():
    """The child's standard error passes through the supervisor as written; a native note from a child that
    lives on is shown too (after the rest), never lost."""
    body = "(os.write(2, b'one\\n'), os.write(2, b'memory allocation of 8 bytes failed\\n'), os.write(2, b'two\\n'), sys.exit(0))"
    program = _program(body)
    _, stderr = program.communicate(timeout=60)
    assert program.returncode == 0 and stderr.splitlines() == ["one", "two", "memory allocation of 8 bytes failed"]


@pytest.mark.parametrize("status", [0, 1, 3, 130])
def test_under_a_memory_limit_the_command_s_exit_status_is_the_program_s(status):
    program = _program(f"sys.exit({status})")
    assert program.wait(timeout=60) == status


def test_under_a_memory_limit_sigterm_reaches_the_command_and_sigkill_ends_it(tmp_path):
    """The parent passes SIGTERM on (the command dies of it here: status 143); a SIGKILL it cannot pass on
    ends the command too, which would otherwise work on unseen."""
    pid_file = tmp_path / "pid"
    body = f"open({str(pid_file)!r}, 'w').write(str(os.getpid())), time.sleep(60)"
    for sent, expected in ((signal.SIGTERM, 143), (signal.SIGKILL, -signal.SIGKILL)):
        pid_file.unlink(missing_ok=True)
        program = _program(body)
        while not pid_file.exists() or not pid_file.read_text():
            time.sleep(0.05)
        command = int(pid_file.read_text())
        assert command != program.pid  # the command runs in a child
        program.send_signal(sent)
        assert program.wait(timeout=30) == expected
        deadline = time.monotonic() + 10
        while _alive(command) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not _alive(command)


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().split(")")[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def test_a_real_command_under_a_tight_memory_limit_ends_in_one_line_naming_memory(tmp_path):
    """``ifqa index dense`` under ``ulimit -v`` 2.2 GB segfaulted in faiss's import (signal 11, no word);
    under 1.6 GB the encoder's weights could not be mapped, blamed on the model. Where the limit bites
    differs by machine and by run (1.5 GiB sufficed once model commands stopped importing sentence-transformers; 1.0 GiB in none): whatever
    fails, the program's last line names memory, and at least one limit must bite, or the test would
    test nothing."""
    corpus = tmp_path / "passages.jsonl"
    corpus.write_text("".join(f'{{"id": "p{i}", "title": "T{i}", "text": "a river {i}"}}\n' for i in range(50)))
    bitten = []
    for gib in (1.0, 1.5):
        program = subprocess.run(
            [sys.executable, "-m", "ifqa", "index", "dense", "--corpus", str(corpus), "-o", str(tmp_path / f"i{gib}")]
            + ["--device", "cpu", "--no-progress"],
            capture_output=True,
            text=True,
            preexec_fn=_under_limit(gib),
            timeout=300,
            env={**os.environ, "HF_HUB_OFFLINE": "1"},
        )
        if program.returncode:
            assert program.returncode == 1, program.stderr
            assert program.stderr.strip().splitlines()[-1].startswith("ifqa: error: out of memory"), program.stderr
            bitten.append(gib)
    assert bitten, "neither limit was tight enough to fail the command"
