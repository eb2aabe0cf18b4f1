"""Where ifqa keeps downloaded and derived files: ``$IFQA_CACHE_DIR``, else ``$XDG_CACHE_HOME/ifqa``,
else ``~/.cache/ifqa``. A container's user may have no home (``HOME`` unset and no passwd entry, as on
OpenShift): then the cache must be named, and ifqa says so in one line."""

from __future__ import annotations

import os
from pathlib import Path

from ifqa.errors import IfqaError


def cache_dir() -> Path:
    if os.environ.get("IFQA_CACHE_DIR"):
        return Path(os.environ["IFQA_CACHE_DIR"])
    if os.environ.get("XDG_CACHE_HOME"):
        return Path(os.environ["XDG_CACHE_HOME"]) / "ifqa"
    try:
        home = Path.home()
    except (RuntimeError, KeyError):  # no HOME and no passwd entry for this uid
        raise IfqaError(
            "no home folder to keep ifqa's cache in (HOME is unset and this user has no passwd entry); "
            "set IFQA_CACHE_DIR (or XDG_CACHE_HOME) to a writable folder"
        ) from None
    return home / ".cache" / "ifqa"
