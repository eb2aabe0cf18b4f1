"""One exception type for user mistakes, so the CLI can print one line instead of a traceback."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

from ifqa.redact import redact


class IfqaError(Exception):
    """A problem with the user's input or set-up, in one line led by ``where`` (a file, and a line);
    redacted here, once, so no caller (CLI, API, server) can show a secret it quotes."""

    def __init__(self, message: str, where: str | Path | None = None, line: int | None = None):
        location = ""
        if where is not None:
            location = f"{where}:{line}: " if line is not None else f"{where}: "
        super().__init__(redact(location + message))


def first_line(text: str, limit: int = 200) -> str:
    """The first non-blank line of ``text`` (a library's multi-line exception message), cut to ``limit``."""
    return next((line.strip() for line in str(text).splitlines() if line.strip()), "")[:limit]


@contextlib.contextmanager
def restoring(path: str | Path, start_over: str) -> Iterator[None]:
    """A saved resume state that this run cannot continue from (edited by hand, from another run or
    version, cut short outside ifqa's atomic writes) is one line naming it, whatever part of the
    restore finds the problem: a missing key, a wrong type, another model's shapes, a step out of
    range. ``start_over`` says what to delete (or which option to use) to begin afresh."""
    import pickle
    import struct

    try:
        yield
    except (
        KeyError,
        TypeError,
        ValueError,
        IndexError,
        AttributeError,
        RuntimeError,
        EOFError,
        FileNotFoundError,  # one of a state's files deleted by hand
        pickle.UnpicklingError,
        struct.error,  # a torch file's header cut or made up
    ) as exc:
        problem = f"missing {exc}" if isinstance(exc, KeyError) else first_line(str(exc), 160) or type(exc).__name__
        raise IfqaError(f"not a resume state this run can continue from ({problem}); {start_over}", path) from None


def check_step(step: object, steps: int, path: str | Path, start_over: str) -> int:
    """A saved step count: a whole number from 0 to ``steps`` (a run never saves past its end)."""
    if isinstance(step, bool) or not isinstance(step, int) or not 0 <= step <= steps:
        raise IfqaError(
            f"not a resume state this run can continue from (step {step!r}, not 0 to {steps}); {start_over}", path
        )
    return step


def system_error_line(exc: BaseException, output: str | None = None) -> str | None:
    """The one line for what the machine refused (a full disk, too few file handles, too little memory),
    saying what it is and what to do; None for anything else. ``output``: where the command writes,
    named when the error itself names no file (numpy reports a full disk as "N requested and M written")."""
    import errno
    import re

    text = str(getattr(exc, "strerror", None) or exc)
    where = getattr(exc, "filename", None) or output
    code = getattr(exc, "errno", None)
    full = "no space left on device" in text.lower()  # a library's own error type (safetensors') says it in words
    if code in (errno.ENOSPC, errno.EDQUOT) or full or re.search(r"\d+ requested and \d+ written", text):
        place = f" holding {where}" if where else ""
        return (
            f"the disk{place} is full ({first_line(text, 80)}{_free(where)}); free space there or write elsewhere, "
            "then rerun the same command (a long job resumes from its last saved state)"
        )
    if code in (errno.EMFILE, errno.ENFILE):
        import resource

        soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
        return (
            f"too many open files (this process may open {soft}); raise the limit (ulimit -n 4096) or use "
            "fewer --workers"
        )
    lowered = text.lower()
    mapped = "failed to map segment" in lowered  # a shared library loaded where no address space is left
    allocation = "can't allocate memory" in lowered or "cannot allocate memory" in lowered
    if isinstance(exc, MemoryError) or mapped or allocation or code == errno.ENOMEM:
        return memory_line(first_line(text, 100) or "MemoryError")
    return None


def _free(where) -> str:
    """How much room is left where a file was being written, as a clause of the disk-full line."""
    import shutil
    from pathlib import Path

    if not where:
        return ""
    place = Path(where)
    while not place.exists() and place != place.parent:
        place = place.parent
    try:
        return f"; {shutil.disk_usage(place).free / 2**20:,.0f} MB free there"
    except OSError:
        return ""


def memory_line(detail: str, remedy: str = "free memory") -> str:
    """What to do when memory ran out, whoever found it (a Python error, or a child's native death)."""
    return (
        f"out of memory ({detail}); lower --batch-size (or --max-memory, --chunk-docs), or {remedy}; "
        "rerun the same command to resume"
    )
