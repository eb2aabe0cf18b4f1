"""Where ifqa keeps downloaded and derived files: ``$IFQA_CACHE_DIR`` or ``~/.cache/ifqa``."""

from __future__ import annotations

import os
from pathlib import Path


def cache_dir() -> Path:
    if os.environ.get("IFQA_CACHE_DIR"):
        return Path(os.environ["IFQA_CACHE_DIR"])
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "ifqa"
