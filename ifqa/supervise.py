"""Under a memory limit (``ulimit -v``), an allocation can fail inside a library's native code, and the
process then dies of a signal where Python can say nothing: faiss's extension segfaults as it loads,
Rust's allocator in tokenizers aborts. There, and only there, the ``ifqa`` program runs its command in
a child process and, should the child die of such a signal, says so in one line naming memory and the
settings to lower. Without a limit, allocations do not fail (the kernel's OOM killer
acts instead), and the command runs in the program's own process as always.

The parent ignores SIGINT (a terminal's Ctrl-C reaches the child, in the same process group), passes
SIGTERM and SIGHUP on, and the child dies with it (``PR_SET_PDEATHSIG``), so that a SIGKILL to the
program stops the work as it would without the supervisor. The child's standard error comes through
the parent, line by line as written, except the lines a native library writes as it dies of a failed
allocation ("memory allocation of 64 bytes failed"): held back, and dropped when the child dies so,
since the one line naming memory says it; shown after all where the child lives on."""

from __future__ import annotations

import os
import re
import signal
import sys

from ifqa.errors import memory_line

#: The signals a native allocation failure ends a process with, as the line names them.
NATIVE_DEATHS = {
    signal.SIGSEGV: "SIGSEGV",
    signal.SIGBUS: "SIGBUS",
    signal.SIGABRT: "SIGABRT",
    signal.SIGILL: "SIGILL",
    signal.SIGFPE: "SIGFPE",
}
_PR_SET_PDEATHSIG = 1
#: What native code writes as an allocation fails and the process aborts (Rust's allocator, the C++
#: runtime): the line naming memory says it instead.
NATIVE_NOTES = re.compile(
    rb"memory allocation of \d+ bytes failed|terminate called after throwing|std::bad_alloc|fatal runtime error|^Aborted"
)


def memory_limit() -> int | None:
    """This process's address-space limit in bytes (``ulimit -v``), or None when there is none."""
    import resource

    soft = resource.getrlimit(resource.RLIMIT_AS)[0]
    return None if soft == resource.RLIM_INFINITY else soft


def supervise() -> int | None:
    """Fork under a memory limit on Linux: in the parent, wait for the child and return the program's
    exit status; in the child (and wherever no fork is needed), None: go on with the command."""
    limit = memory_limit()
    if limit is None or not sys.platform.startswith("linux"):
        return None
    parent = os.getpid()
    read, write = os.pipe()
    child = os.fork()
    if child == 0:
        os.close(read)
        os.dup2(write, sys.stderr.fileno())  # its standard error, through the parent (see the module)
        os.close(write)
        _die_with(parent)
        return None
    os.close(write)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    for forwarded in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(forwarded, lambda number, frame: os.kill(child, number))
    held = _pass_on(read)
    _, status = os.waitpid(child, 0)  # PEP 475: a forwarded signal does not cut the wait short
    code = os.waitstatus_to_exitcode(status)  # -N: killed by signal N
    if -code in NATIVE_DEATHS:
        detail = f"{NATIVE_DEATHS[-code]} in a library's native code, under ulimit -v of {limit / 2**30:.1f} GiB"
        print(f"ifqa: error: {memory_line(detail, 'raise the limit')}", file=sys.stderr, flush=True)
        return 1
    _write(b"".join(held))
    return code if code >= 0 else 128 - code


def _pass_on(read: int) -> list[bytes]:
    """The child's standard error written on as it comes, line by line, until every writer closed it; the
    native libraries' dying words held back and returned."""
    held, pending = [], b""
    with os.fdopen(read, "rb", buffering=0) as stream:
        while chunk := stream.read(65536):
            lines = (pending + chunk).split(b"\n")
            pending = lines.pop()
            for line in lines:
                (held.append if NATIVE_NOTES.search(line) else _write)(line + b"\n")
    if pending:
        (held.append if NATIVE_NOTES.search(pending) else _write)(pending)
    return held


def _write(data: bytes) -> None:
    if data:
        sys.stderr.flush()
        os.write(sys.stderr.fileno(), data)


def _die_with(parent: int) -> None:
    """The child ends when the program does, even by SIGKILL, which the parent cannot pass on."""
    import ctypes

    ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent:  # the parent died before the line above took effect
        os._exit(1)
