"""Every ``IFQA_*`` variable ifqa reads, checked where a command starts, on every device: a value that
cannot work is one line naming the variable before any work, not a word-less acceptance on a CPU
because only the CUDA path reads it (``IFQA_FEED_WORKERS=abc`` was). The modules that read a variable
read it as before; this table is where each is declared (tests/test_environment.py holds it to the
names the package reads)."""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Mapping

from ifqa.errors import IfqaError


def _count(value: str) -> str | None:
    return None if value.strip().isdigit() else "a number of worker processes, 0 or more"


def _seconds(value: str) -> str | None:
    try:
        seconds = float(value)
    except ValueError:
        seconds = math.nan
    return None if math.isfinite(seconds) and seconds > 0 else "a positive number of seconds"


def _dist_backend(value: str) -> str | None:
    return None if value in ("nccl", "gloo") else "nccl or gloo"


def _location(value: str) -> str | None:
    """A folder, a URL or a hub id: anything but nothing."""
    return None if value.strip() and "\0" not in value else "a folder, URL or id (unset it for the default)"


#: name -> what its value must be (a check returning what is wrong, or None)
VARIABLES: dict[str, Callable[[str], str | None]] = {
    "IFQA_FEED_WORKERS": _count,  # feeding.py: processes preparing a model's batches (on any device when set)
    "IFQA_DIST_TIMEOUT": _seconds,  # launch.py: seconds a collective or a fenced save may take
    "IFQA_DIST_BACKEND": _dist_backend,  # distributed.py: the process group's backend
    "IFQA_CACHE_DIR": _location,  # paths.py
    "IFQA_DATA_DIR": _location,  # datasets/ifqa.py
    "IFQA_PROMPTS_DIR": _location,  # readers/llm/prompts.py
    "IFQA_BASE_URL": _location,  # datasets/ifqa.py: where IfQA's release is served
    "IFQA_WIQA_URL": _location,  # datasets/wiqa.py
    "IFQA_CAUSALQA_URL": _location,  # datasets/causalqa.py
    "IFQA_FAITHEVAL": _location,  # datasets/hub_sets.py: another hub id or a local copy
}


def check_environment(environ: Mapping[str, str] = os.environ) -> None:
    """Refuse, in one line naming it, the first ``IFQA_*`` variable set to a value that cannot work."""
    for name, check in VARIABLES.items():
        if name in environ:
            problem = check(environ[name])
            if problem:
                raise IfqaError(f"{name}={environ[name]!r}: give {problem}")
