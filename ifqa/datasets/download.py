"""Fetching a release archive once: streamed to a temporary file with progress, checked, then
unpacked member by member into the cache (each file renamed into place only when complete).

Used by the WIQA and CausalQA datasets; every URL is overridable (option or environment), so the
tests serve fixture archives from a local HTTP server.
"""

from __future__ import annotations

import hashlib
import logging
import shutil
import tempfile
import urllib.error
import urllib.request
import zipfile
from pathlib import Path
from typing import Callable

from ifqa.errors import IfqaError
from ifqa.io import atomic_write

log = logging.getLogger(__name__)


def fetch_archive(url: str, folder: Path, sha256: str | None = None, progress: bool = True) -> Path:
    """Download ``url`` into a temporary file under ``folder`` (checked against ``sha256`` when given)."""
    from tqdm import tqdm

    folder.mkdir(parents=True, exist_ok=True)
    handle = tempfile.NamedTemporaryFile(dir=folder, prefix=".download-", suffix=".zip", delete=False)
    path = Path(handle.name)
    digest = hashlib.sha256()
    log.info("downloading %s", url)
    try:
        with handle, urllib.request.urlopen(url, timeout=60) as response:
            total = int(response.headers.get("Content-Length") or 0) or None
            with tqdm(total=total, unit="B", unit_scale=True, desc="download", disable=not progress) as bar:
                while chunk := response.read(1 << 20):
                    handle.write(chunk)
                    digest.update(chunk)
                    bar.update(len(chunk))
    except (urllib.error.URLError, OSError) as exc:
        path.unlink(missing_ok=True)
        raise IfqaError(f"download failed: {exc}", url) from None
    except BaseException:
        path.unlink(missing_ok=True)
        raise
    if sha256 and digest.hexdigest() != sha256:
        path.unlink(missing_ok=True)
        raise IfqaError(f"downloaded file's sha256 is {digest.hexdigest()}, expected {sha256}", url)
    return path


def extract(archive: Path, url: str, wanted: Callable[[str], Path | None]) -> list[Path]:
    """Unpack the members ``wanted(member_name)`` maps to a target path; at least one must exist."""
    written = []
    try:
        with zipfile.ZipFile(archive) as packed:
            for member in packed.namelist():
                target = wanted(member)
                if target is None:
                    continue
                with packed.open(member) as source, atomic_write(target, "wb") as out:
                    shutil.copyfileobj(source, out)
                written.append(target)
    except zipfile.BadZipFile:
        raise IfqaError("downloaded file is not a zip archive", url) from None
    if not written:
        raise IfqaError("the archive holds none of the expected files", url)
    return written
