"""A run's commits: the renames (``os.replace``, ``os.rename``) and removals (``shutil.rmtree``) of paths
in one folder, each seen right after it is done. Used by tests/test_kill_last_second.py to count a run's
commits in its own process and, in a child started with ``python -c``, to kill that child right after
one of them; kept free of heavy imports, as the child loads it before ifqa."""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Callable, Iterator


@contextlib.contextmanager
def watched(folder: str, after_commit: Callable[[str], None]) -> Iterator[None]:
    """Call ``after_commit(path)`` after each rename into, or removal of, a path in ``folder`` that
    existed before (a removal of nothing changes nothing)."""

    def counted(change, place: int):
        def commit(*args, **kwargs):
            there = os.path.lexists(args[0])
            change(*args, **kwargs)
            if there and os.path.abspath(args[place]).startswith(f"{folder}{os.sep}"):
                after_commit(os.fspath(args[place]))

        return commit

    originals = os.replace, os.rename, shutil.rmtree
    os.replace, os.rename, shutil.rmtree = counted(os.replace, 1), counted(os.rename, 1), counted(shutil.rmtree, 0)
    try:
        yield
    finally:
        os.replace, os.rename, shutil.rmtree = originals
