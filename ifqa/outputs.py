"""One guard for everything ifqa writes: an output is never one of the inputs it is made from, nor
what they resolve to (``read_through``: an index's recorded collection, a run's recorded questions, a
spec's cache files). docs/ARCHITECTURE.md ("Outputs") gives the rules; resolving paths here never
raises (a symlink loop or an unreadable manifest is simply nothing more to compare)."""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from ifqa.artifacts import manifest_path
from ifqa.errors import IfqaError
from ifqa.io import check_writable_kind
from ifqa.registry import INDEX_SCHEMES, split_spec


def _resolved(path: Path) -> Path:
    """``path`` through its symlinks; as written (made absolute) where they loop or cannot be read."""
    try:
        return path.resolve()
    except (OSError, RuntimeError):  # RuntimeError: a symlink loop
        return Path(os.path.abspath(path))


def _same(a: Path, b: Path) -> bool:
    if _resolved(a) == _resolved(b):
        return True
    try:
        return os.path.samefile(a, b)
    except (OSError, ValueError):  # one of them does not exist (yet), or loops
        return False


def _inside(path: Path, folder: Path) -> bool:
    """``path`` lies in ``folder`` (both resolved), at any depth; hard links are not followed."""
    try:
        is_folder = folder.is_dir()
    except OSError:
        return False
    return is_folder and _resolved(path).is_relative_to(_resolved(folder)) and not _same(path, folder)


def _recorded(manifest: Path, *keys: str) -> list[Path]:
    """The existing paths a manifest records under ``keys`` (a dotted path into it: ``corpus.path``;
    a list on the way is walked), relative ones read from where the manifest was written."""
    import json

    try:
        data = json.loads(manifest.read_text(encoding="utf-8"))
    except (OSError, ValueError, UnicodeError, RecursionError):
        return []
    found: list[Path] = []
    for key in keys:
        values = [data]
        for part in key.split("."):
            values = [
                item.get(part)
                for value in values
                for item in (value if isinstance(value, list) else [value])
                if isinstance(item, dict)
            ]
        for value in values:
            if isinstance(value, str) and value.strip() and ":" not in value.split("/")[0]:
                path = Path(value).expanduser()
                if os.path.lexists(path):
                    found.append(path)
    return found


def read_through(path: Path) -> list[Path]:
    """What a command reads through ``path`` besides ``path`` itself: for an index folder, the
    collection its manifest records; for a run or predictions file, the questions file its manifest
    records. One level (a recorded file's own records are not what this command reads)."""
    try:
        if path.is_dir():
            return _recorded(path / "manifest.json", "corpus.path")
        return _recorded(manifest_path(path), "questions.name")
    except OSError:
        return []


def spec_paths(text: str) -> list[Path]:
    """The files behind an index spec (``demo:bm25``): what its scheme says it reads (cache files),
    whether or not they exist yet. Nothing for a text that is no registered spec."""
    scheme, name = split_spec(text)
    if scheme is None:
        return []
    try:
        reads = getattr(INDEX_SCHEMES.get(scheme), "reads", None)
        return list(reads(name)) if reads else []
    except Exception:  # noqa: BLE001 - an unknown name is the command's own error to report, not the guard's
        return []


def input_paths(values: Iterable[Any]) -> list[Path]:
    """The existing files and folders a command's option values name (a value may be a list, or
    comma-separated names): anything a command can read. Names that are not paths are skipped."""
    found: list[Path] = []
    for value in values:
        if isinstance(value, (list, tuple)):
            found += input_paths(value)
        elif isinstance(value, (str, os.PathLike)) and str(value).strip():
            text = os.fspath(value)
            for name in {text, *(text.split(",") if "," in text else ())}:
                path = Path(name).expanduser()
                if name and os.path.lexists(path):
                    found += [path, *read_through(path)]
                elif name:
                    found += spec_paths(name)
    return found


def check_output(
    output: str | os.PathLike | None,
    inputs: Iterable[Any] | Mapping[str, Any],
    option: str = "--output",
) -> None:
    """Refuse ``output`` (one line naming both) when writing it could destroy an input.

    ``inputs``: option values (or ``{option: value}``) the writer reads; those that name existing
    files or folders are checked."""
    if output is None or not str(output).strip():
        return
    check_writable_kind(output, option)
    if split_spec(os.fspath(output))[0] is not None:  # an index spec (demo:dense, prebuilt:NAME) is read, never written
        raise IfqaError(
            f"{option} {output}: an index spec names an index to read, not a folder to write; name a folder"
        )
    out = Path(output).expanduser()
    named = inputs.items() if isinstance(inputs, Mapping) else ((None, value) for value in inputs)
    for name, value in named:
        for given in input_paths([value]):
            problem = _conflict(out, given)
            if problem:
                where = f"{name} {given}" if name else str(given)
                raise IfqaError(f"{option} {problem} the input {where}; write it elsewhere", out)


def _conflict(out: Path, given: Path) -> str | None:
    """How writing ``out`` would touch ``given``, or None."""
    if _same(out, given):
        return "is"
    if _same(out, manifest_path(given)):
        return "is the manifest of"
    if _same(manifest_path(out), given):
        return "has its manifest on"
    if _inside(out, given):
        return "lies inside"
    if _inside(given, out):
        return "is a folder holding"
    return None


def check_folder_owned(
    output: str | os.PathLike | None,
    owns: Iterable[str],
    option: str = "--output",
    replaces: dict[str, tuple[str, ...]] | None = None,
) -> None:
    """Refuse a folder output that holds anything but none of ``owns``, the names (or glob patterns, or
    paths inside it) that mark the command's own work (a training run's record, an index's manifest):
    what it holds was not written by this command, and would be replaced or mixed with what it writes.
    ``replaces``: the subfolders the command replaces whole, each with the names that mark it as the
    command's; one that holds anything but none of them is refused too, at any depth of the output."""
    owns = tuple(owns)
    if not output or not owns or not Path(output).is_dir():
        return
    folder = Path(output)
    held = sorted(entry.name for entry in folder.iterdir())
    if held and not any(_marked(folder, name) for name in owns):
        raise IfqaError(
            f"{option} {output}: holds {_shown(held)}, which this command did not write; name a new or empty folder"
        )
    for name, marks in (replaces or {}).items():
        inside = folder / name
        found = sorted(entry.name for entry in inside.iterdir()) if inside.is_dir() else []
        if found and not any(_marked(inside, mark) for mark in marks):
            raise IfqaError(
                f"{option} {output}: its {name}/ holds {_shown(found)}, which this command did not write and would "
                "replace; move it, or name a new or empty folder"
            )


def _marked(folder: Path, name: str) -> bool:
    return any(folder.glob(name)) if "*" in name else (folder / name).exists()


def _shown(names: list[str]) -> str:
    return ", ".join(names[:3]) + (" ..." if len(names) > 3 else "")
