"""The suite's scratch folder (issue #36): never delete what the suite did not make."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path


class Refused(Exception):
    """A bad flag: one line on stderr, exit status 1."""


MARKER = ".gpu-suite-work.json"
MADE_BY = "benchmarks/gpu_suite.py"


class Workspace:
    """The suite's scratch folder: one it created, or an empty one it was given; either way marked
    with ``MARKER``, which lists every entry the suite made there. A later run removes exactly those
    entries (whatever else is in the folder stays); nothing else is ever deleted."""

    def __init__(self, folder: Path, entries: list[str]):
        self.folder, self.entries = folder, entries

    @staticmethod
    def recorded(folder: Path) -> list[str] | None:
        """The entries a marked folder lists; None when it has no mark; ``Refused`` for a mark that is not the suite's."""
        marker = folder / MARKER
        if not marker.exists() and not marker.is_symlink():
            return None
        try:
            if marker.is_symlink() or not marker.is_file():
                raise ValueError
            content = json.loads(marker.read_text(encoding="utf-8"))
            entries = content["entries"]
            if (
                content.get("made_by") != MADE_BY
                or not isinstance(entries, list)
                or not all(isinstance(name, str) and _plain_name(name) for name in entries)
            ):
                raise ValueError
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            raise Refused(f"--work {folder}: its {MARKER} is not one this suite wrote; pick another --work") from None
        return entries

    @classmethod
    def check(cls, folder: Path) -> None:
        """Refuse, with nothing touched, a folder the suite may not use."""
        if folder.is_symlink() and not folder.exists():
            raise Refused(f"--work {folder}: a broken link")
        if folder.exists() and not folder.is_dir():
            raise Refused(f"--work {folder}: an existing file, not a folder")
        if folder.is_dir() and cls.recorded(folder) is None and any(folder.iterdir()):
            raise Refused(
                f"--work {folder}: a folder that is not empty and not the suite's (no {MARKER}); "
                "give a new or empty folder"
            )
        parent = next((p for p in folder.absolute().parents if p.exists()), None)
        if parent is not None and not parent.is_dir():
            raise Refused(f"--work {folder}: {parent} is a file")

    @classmethod
    def claim(cls, folder: Path) -> Workspace:
        """The folder, created or cleared of what an earlier run of the suite made in it, and marked."""
        cls.check(folder)
        folder.mkdir(parents=True, exist_ok=True)
        for name in cls.recorded(folder) or []:
            _remove(folder / name)
        work = cls(folder, [])
        work._write()
        return work

    def new(self, name: str) -> Path:
        """``folder/name``, recorded as the suite's before anything is written there; a name already
        there that the suite did not make is refused (a user's file: never overwritten)."""
        if name not in self.entries:
            path = self.folder / name
            if path.exists() or path.is_symlink():
                raise Refused(f"{path} is not the suite's; move it out of --work {self.folder}")
            self.entries.append(name)
            self._write()
        return self.folder / name

    def _write(self) -> None:
        temporary = self.folder / (MARKER + ".tmp")
        temporary.write_text(json.dumps({"made_by": MADE_BY, "entries": self.entries}, indent=1), encoding="utf-8")
        os.replace(temporary, self.folder / MARKER)


def _plain_name(name: str) -> bool:
    return bool(name) and name not in (".", "..", MARKER) and "/" not in name and "\\" not in name and "\0" not in name


def _remove(path: Path) -> None:
    """Remove an entry the suite made; a link is removed, never followed."""
    if path.is_symlink() or path.is_file():
        path.unlink()
    elif path.is_dir():
        shutil.rmtree(path)
