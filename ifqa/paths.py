"""Where ifqa keeps downloaded and derived files: ``$IFQA_CACHE_DIR`` or ``~/.cache/ifqa``."""

from __future__ import annotations

import os
from pathlib import Path


def cache_dir() -> Path:
    if os.environ.get("IFQA_CACHE_DIR"):
        return Path(os.environ["IFQA_CACHE_DIR"])
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "ifqa"


def check_model_location(name: str | Path) -> None:
    """A model named by a path that does not exist is refused at once, not looked up on the hub
    (which takes 30 s offline and then fails with a hub error). Hub ids are ``name`` or ``org/name``."""
    from ifqa.errors import IfqaError

    text = str(name)
    if Path(text).expanduser().exists():
        return
    if text.startswith((".", "/", "~")) or text.count("/") >= 2 or os.sep != "/" and os.sep in text:
        raise IfqaError("no such model folder", text)
