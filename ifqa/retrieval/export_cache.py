"""The cache of exported models: every file's checksum recorded in the export's manifest and checked
before each use (a truncated, deleted or swapped file, or a damaged manifest, means exporting
again), exports made in private staging folders and renamed into place, so concurrent exports of
one model both succeed and a reader never sees half an export."""

from __future__ import annotations

import json
from pathlib import Path

from ifqa.errors import IfqaError
from ifqa.io import file_sha256 as sha256
from ifqa.io import remove_path, staging_prefix, umask_modes

MANIFEST = "manifest.json"


def cached_problem(folder: Path, manifest: dict) -> str | None:
    """Why the cached export in ``folder`` cannot be used (None when it can): none there, made from
    another model or with other settings, a damaged manifest, or a file missing, truncated or
    swapped (each file's checksum is in the manifest)."""
    if not folder.exists():
        return "not exported yet"
    try:
        saved = json.loads((folder / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError, UnicodeDecodeError):
        return "its manifest is missing or unreadable"
    if not isinstance(saved, dict) or not isinstance(saved.get("files"), dict) or not saved["files"]:
        return "its manifest is not an export's (no checksums of its files)"
    if {key: saved.get(key) for key in manifest} != manifest:
        return "made from another model or with other settings"
    for name, expected in saved["files"].items():
        path = folder / str(name)
        if not path.is_file():
            return f"{name} is missing"
        if sha256(path) != expected:
            return f"{name} does not match its checksum (truncated or replaced)"
    return None


def staging_folder(folder: Path) -> Path:
    """A new private folder beside ``folder`` (one line when the cache cannot be written); what a
    killed export left beside it is removed first."""
    import tempfile

    try:
        folder.parent.mkdir(parents=True, exist_ok=True)
        # .NAME.PID.*.tmp: a staging folder whose process died (SIGKILL) is removed by the next export
        return Path(tempfile.mkdtemp(prefix=staging_prefix(folder), suffix=".tmp", dir=folder.parent))
    except OSError as exc:
        raise IfqaError(
            f"the export cache cannot be written ({exc.strerror or exc}); set IFQA_CACHE_DIR to a writable "
            "folder, or use --runtime torch",
            folder.parent,
        ) from None


def publish(staging: Path, folder: Path, manifest: dict) -> None:
    """Rename ``staging`` into place atomically. A damaged export there is moved aside first; a sound
    one another process published meanwhile wins, and this process's copy is dropped."""
    umask_modes(staging)
    for _ in range(3):
        try:
            staging.rename(folder)
            return
        except OSError:  # the folder exists (another process's export, or a damaged one)
            if cached_problem(folder, manifest) is None:
                return
            aside = staging.with_name(f"{staging.name[: -len('.tmp')]}.old.tmp")  # a killed run's: staging_prefix's
            try:
                folder.rename(aside)
            except OSError:
                continue  # moved by another process in between: try again
            remove_path(aside)  # a folder, or a link in its place (a symlink loop): never left behind
    raise IfqaError("could not replace the damaged cached export; delete it and rerun", folder)
