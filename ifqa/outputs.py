"""One guard for everything ifqa writes: an output is never one of the inputs it is made from.

Every command's output options and every API function that writes call ``check_output`` before
they start, so ``-o q.json --questions q.json``, an index folder trained into, or a corpus built
over its own dump is one line, not a destroyed input. Paths are compared as the file system sees
them (through symlinks, ``..`` and hard links), manifests included (``run.jsonl.manifest.json``
belongs to ``run.jsonl``), and folders both ways: an output may not lie inside a folder the
command reads (an index, a model), nor may an input lie inside an output folder (which is replaced
whole when it is written)."""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from ifqa.artifacts import manifest_path
from ifqa.errors import IfqaError


def _same(a: Path, b: Path) -> bool:
    if a.resolve() == b.resolve():
        return True
    try:
        return os.path.samefile(a, b)
    except OSError:  # one of them does not exist (yet)
        return False


def _inside(path: Path, folder: Path) -> bool:
    """``path`` lies in ``folder`` (both resolved), at any depth; hard links are not followed."""
    return folder.is_dir() and path.resolve().is_relative_to(folder.resolve()) and not _same(path, folder)


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
                    found.append(path)
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
