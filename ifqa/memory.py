"""Memory limits stated before a long job starts, not discovered after it swaps: ``--max-memory 16G``
(or the machine's memory) against the job's estimated peak, which smaller pieces may bring within it."""

from __future__ import annotations

import os
import re

from ifqa.errors import IfqaError

_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgt]?)i?b?\s*$", re.IGNORECASE)
_UNITS = {"": 1, "k": 2**10, "m": 2**20, "g": 2**30, "t": 2**40}


def parse_size(text: str) -> int:
    """Bytes from ``16G``, ``800M``, ``1.5GiB``, ``2048`` (bytes)."""
    match = _SIZE.match(text or "")
    if not match:
        raise IfqaError(f"--max-memory must be a size such as 16G or 800M, got {text!r}")
    return int(float(match.group(1)) * _UNITS[match.group(2).lower()])


def physical_memory() -> int | None:
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None


def size_text(size: float) -> str:
    """In GB, MB or kB, whichever is the largest unit below ``size``: a small figure is not "0.0 GB"."""
    for unit, scale in (("GB", 2**30), ("MB", 2**20)):
        if size >= scale:
            return f"{size / scale:.1f} {unit}"
    return f"{size / 2**10:.1f} kB"


def limit(max_memory: str | None) -> tuple[int, str]:
    """The budget in bytes and where it comes from: ``--max-memory`` or the machine."""
    machine = physical_memory()
    if max_memory:
        budget = parse_size(max_memory)
        if machine and budget > machine:
            raise IfqaError(f"--max-memory {size_text(budget)} is more than this machine has ({size_text(machine)})")
        return budget, f"--max-memory {size_text(budget)}"
    return (machine or 2**62), f"this machine's {size_text(machine)}" if machine else "no known limit"
