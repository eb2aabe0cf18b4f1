"""Under a memory limit (``ulimit -v``), an allocation can fail inside a library's native code, and the
process then dies of a signal where Python can say nothing: faiss's extension segfaults as it loads,
Rust's allocator in tokenizers aborts. There, and only there, the ``ifqa`` program runs its command in
a child process and, should the child die of such a signal, says so in one line naming memory and the
settings to lower (trust round 9). Without a limit, allocations do not fail (the kernel's OOM killer
acts instead), and the command runs in the program's own process as always.

The parent ignores SIGINT (a terminal's Ctrl-C reaches the child, in the same process group), passes
SIGTERM and SIGHUP on, and the child dies with it (``PR_SET_PDEATHSIG``), so that a SIGKILL to the
program stops the work as it would without the supervisor."""

from __future__ import annotations

import os
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
    child = os.fork()
    if child == 0:
        _die_with(parent)
        return None
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    for forwarded in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(forwarded, lambda number, frame: os.kill(child, number))
    _, status = os.waitpid(child, 0)  # PEP 475: a forwarded signal does not cut the wait short
    code = os.waitstatus_to_exitcode(status)  # -N: killed by signal N
    if -code in NATIVE_DEATHS:
        detail = f"{NATIVE_DEATHS[-code]} in a library's native code, under ulimit -v of {limit / 2**30:.1f} GiB"
        print(f"ifqa: error: {memory_line(detail, 'raise the limit')}", file=sys.stderr, flush=True)
        return 1
    return code if code >= 0 else 128 - code


def _die_with(parent: int) -> None:
    """The child ends when the program does, even by SIGKILL, which the parent cannot pass on."""
    import ctypes

    ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent:  # the parent died before the line above took effect
        os._exit(1)
