"""Installing a release archive into the cache: streamed to a temporary file with progress, the wanted
members unpacked into a scratch folder, each validated, and only then moved into place.

Used by the WIQA and CausalQA datasets; every URL is overridable (option or environment), so the
tests serve fixture archives from a local HTTP server.
"""

from __future__ import annotations

import base64
import logging
import shutil
import tempfile
import urllib.error
import urllib.request
import zipfile
from collections.abc import Callable
from pathlib import Path
from urllib.parse import unquote, urlsplit, urlunsplit

from ifqa.errors import IfqaError
from ifqa.io import atomic_write, read_json, staging_prefix, sweep_staging, write_json
from ifqa.redact import redact_url

log = logging.getLogger(__name__)


def join_url(base: str, *parts: str) -> str:
    """``base`` with path parts added before its query (``?token=...`` stays on the request)."""
    split = urlsplit(base)
    return urlunsplit(split._replace(path="/".join([split.path.rstrip("/"), *parts])))


def open_url(url: str, timeout: float = 60):
    """``urllib.request.urlopen``, with a user and password in the URL sent as HTTP Basic
    authentication (urllib cannot take them from the URL itself)."""
    split = urlsplit(url)
    if split.username is None:
        return urllib.request.urlopen(url, timeout=timeout)
    host = f"[{split.hostname}]" if ":" in (split.hostname or "") else split.hostname or ""
    request = urllib.request.Request(urlunsplit(split._replace(netloc=host + (f":{split.port}" if split.port else ""))))
    credentials = f"{unquote(split.username)}:{unquote(split.password or '')}".encode()
    request.add_header("Authorization", "Basic " + base64.b64encode(credentials).decode())
    return urllib.request.urlopen(request, timeout=timeout)


def fetch_archive(url: str, folder: Path, progress: bool = True) -> Path:
    """Download ``url`` into a temporary file under ``folder``."""
    from tqdm import tqdm

    folder.mkdir(parents=True, exist_ok=True)
    # named as staging is (io.staging_prefix): what a killed download left is removed by the next one
    handle = tempfile.NamedTemporaryFile(
        dir=folder, prefix=staging_prefix(folder / "download"), suffix=".tmp", delete=False
    )
    path = Path(handle.name)
    log.info("downloading %s", url)
    try:
        with handle, open_url(url) as response:
            total = int(response.headers.get("Content-Length") or 0) or None
            with tqdm(total=total, unit="B", unit_scale=True, desc="download", disable=not progress) as bar:
                while chunk := response.read(1 << 20):
                    handle.write(chunk)
                    bar.update(len(chunk))
    except (urllib.error.URLError, OSError) as exc:
        path.unlink(missing_ok=True)
        raise IfqaError(f"download failed: {exc}", url) from None
    except BaseException:
        path.unlink(missing_ok=True)
        raise
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


#: Written last by ``install``: which files a whole release put in its folder.
RECORD = "release.json"


def installed(folder: Path) -> list[Path] | None:
    """The files a completed install put in ``folder`` (its record, written last, names them), or None
    for a release not installed whole (a run killed between its files: the next one installs it again);
    staging a killed run left is removed either way."""
    if not folder.is_dir():
        return None
    sweep_staging(folder)
    record = folder / RECORD
    if not record.is_file():
        return None
    files = [folder / name for name in read_json(record).get("files", [])]
    return files if files and all(p.is_file() for p in files) else None


def install(
    url: str, folder: Path, place: Callable[[str], str | None], check: Callable[[Path], object], progress: bool = True
) -> list[Path]:
    """Download the archive at ``url`` and install the members ``place(member)`` names (a path relative
    to ``folder``): each is unpacked into a scratch folder and passed to ``check``, and they move into
    ``folder`` only when every one passed; the archive and the scratch folder never stay behind."""
    created = not folder.exists()
    try:
        archive = fetch_archive(url, folder, progress)
    except BaseException:
        if created:  # a failed first download leaves no empty dataset folder behind
            shutil.rmtree(folder, ignore_errors=True)
        raise
    try:
        with tempfile.TemporaryDirectory(
            dir=folder, prefix=staging_prefix(folder / "unpacked"), suffix=".tmp"
        ) as scratch:
            staging = Path(scratch)
            written = extract(archive, url, lambda member: staging / where if (where := place(member)) else None)
            for path in written:
                check(path)  # a broken release never reaches the cache
            (folder / RECORD).unlink(missing_ok=True)  # files are replaced from here: no record vouches for a mix
            installed = []
            for path in written:
                target = folder / path.relative_to(staging)
                target.parent.mkdir(parents=True, exist_ok=True)
                path.replace(target)
                installed.append(target)
            write_json(
                folder / RECORD, {"url": redact_url(url), "files": [str(p.relative_to(folder)) for p in installed]}
            )
            return installed
    except BaseException:
        if created:
            shutil.rmtree(folder, ignore_errors=True)
        raise
    finally:
        archive.unlink(missing_ok=True)
