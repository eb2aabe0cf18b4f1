"""File helpers shared by every stage: JSON Lines with line-numbered errors, atomic writes."""

from __future__ import annotations

import contextlib
import glob
import gzip
import io
import json
import os
import re
import shutil
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import IO, Any

from ifqa.errors import IfqaError


def open_text(path: str | Path) -> IO[str]:
    """Open a plain or gzip-compressed text file for reading, UTF-8 (a byte-order mark that some
    editors put first is dropped, not read as part of the first record)."""
    path = Path(path)
    if not path.exists():
        raise IfqaError("no such file", path)
    if path.suffix == ".gz":
        return io.TextIOWrapper(gzip.open(path, "rb"), encoding="utf-8-sig")
    return open(path, encoding="utf-8-sig")


#: What a text holding a lone surrogate is told, wherever it came in (a file, a request).
BOM = b"\xef\xbb\xbf"  # UTF-8's byte-order mark, which editors on Windows put first in a file
SURROGATE_PROBLEM = "holds an unpaired surrogate (\\ud800-\\udfff): not valid Unicode text"


def nfc(text: str) -> str:
    """Text in Unicode's composed form (NFC), as it enters ifqa: questions, queries and passages, so
    canonically equivalent text ("é" as one code point or as "e" and an accent) is the same question,
    query or passage everywhere after (tokens, hashes, question-set identity). Identity for NFC text."""
    import unicodedata

    return text if unicodedata.is_normalized("NFC", text) else unicodedata.normalize("NFC", text)


def unpaired_surrogate(*texts: str) -> bool:
    """Whether a text holds half of a UTF-16 pair (JSON's ``"\\ud800"``): a Python string, but not
    Unicode text that can be written, tokenized or hashed."""
    try:
        for text in texts:
            text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def read_manifest_object(path: str | Path, advice: str = "") -> dict:
    """A manifest (an index's, a run's): a JSON object, a byte-order mark dropped; anything else is
    one line naming the file, ``advice`` after it."""
    try:
        manifest = json.loads(Path(path).read_text(encoding="utf-8-sig"))
    except (ValueError, UnicodeDecodeError, RecursionError) as exc:
        raise IfqaError(f"unreadable manifest ({str(exc)[:120] or 'nested too deeply'}){advice}", path) from None
    if not isinstance(manifest, dict):
        raise IfqaError(f"damaged manifest: a JSON object is needed, not a {type(manifest).__name__}{advice}", path)
    return manifest


def read_jsonl(path: str | Path) -> Iterator[tuple[int, Any]]:
    """Yield ``(line_number, record)`` for each non-blank line; bad JSON raises a located IfqaError."""
    with open_text(path) as handle:
        try:
            for number, line in enumerate(handle, start=1):
                if not line.strip():
                    continue
                try:
                    yield number, json.loads(line)
                except json.JSONDecodeError as exc:
                    raise IfqaError(f"invalid JSON ({exc.msg} at column {exc.colno})", path, number) from None
                except RecursionError:
                    raise IfqaError("invalid JSON (nested too deeply)", path, number) from None
        except (UnicodeDecodeError, EOFError, gzip.BadGzipFile) as exc:
            raise unreadable(exc, path) from None


def unreadable(exc: BaseException, path: str | Path) -> IfqaError:
    """One line for a file that cannot be decoded: not UTF-8, a cut gzip stream, not gzip at all."""
    if isinstance(exc, EOFError):
        return IfqaError("compressed data ends early (truncated file?)", path)
    if isinstance(exc, gzip.BadGzipFile):
        return IfqaError("named .gz but is not gzip-compressed", path)
    return IfqaError(f"not UTF-8 text ({exc})", path)


def read_json(path: str | Path) -> Any:
    """Load one JSON document; bad JSON raises an IfqaError naming the line."""
    with open_text(path) as handle:
        try:
            return json.load(handle)
        except json.JSONDecodeError as exc:
            raise IfqaError(f"invalid JSON ({exc.msg} at column {exc.colno})", path, exc.lineno) from None
        except RecursionError:
            raise IfqaError("invalid JSON (nested too deeply)", path) from None
        except (UnicodeDecodeError, EOFError, gzip.BadGzipFile) as exc:
            raise unreadable(exc, path) from None


@contextlib.contextmanager
def atomic_write(path: str | Path, mode: str = "w") -> Iterator[IO]:
    """Write to a temporary file beside ``path``, renamed into place only on success (readers never see
    a half-written file); a target that is not a regular file (``/dev/null``) is refused, never renamed over."""
    path = Path(path)
    check_writable_kind(path, "output")
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=staging_prefix(path), suffix=".tmp", dir=path.parent)
    try:
        binary = "b" in mode
        with os.fdopen(fd, mode, **({} if binary else {"encoding": "utf-8"})) as handle:
            yield handle
            handle.flush()
            os.fsync(handle.fileno())
        umask_modes(tmp)  # mkstemp creates 0600; outputs get the usual permissions
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def file_sha256(path: str | Path) -> str:
    """A file's sha256, read in 4 MB blocks."""
    import hashlib

    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 22), b""):
            digest.update(block)
    return digest.hexdigest()


def content_digest(paths: Iterable[str | Path], salt: str = "") -> str:
    """SHA-256 over ``salt`` and each path with its file's bytes (paths that are not local files, a Hub
    URL, by name alone): a cache keyed by it follows what the files hold, never their names or times,
    so a folder rewritten in place is read again."""
    import hashlib

    digest = hashlib.sha256(salt.encode("utf-8"))
    for path in sorted(map(str, paths)):
        digest.update(path.encode("utf-8", "surrogateescape") + b"\0")
        if os.path.isfile(path):
            digest.update(bytes.fromhex(file_sha256(path)))
    return digest.hexdigest()


def check_writable_kind(output: str | os.PathLike, option: str = "--output") -> None:
    """An output is a regular file or folder (or nothing yet): ``-`` and devices, FIFOs and sockets
    are refused, one rule for every command."""
    text = os.fspath(output)
    if text.strip() == "-":
        raise IfqaError(
            f"{option} -: ifqa writes files (with a manifest beside them), not standard output; name a file"
        )
    try:
        mode = os.stat(text).st_mode
    except (OSError, ValueError):  # not there yet (or a loop, reported by what opens it)
        return
    import stat

    if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
        raise IfqaError(
            f"{option}: not a regular file (a device, FIFO or socket); ifqa writes a file and renames it "
            "into place, which would replace it; name a file",
            text,
        )


@contextlib.contextmanager
def exclusive(path: str | Path, what: str = "another run is writing this output") -> Iterator[None]:
    """Hold ``.<name>.lock`` beside ``path`` for the block: a second process that wants the same output
    is refused in one line at once (``what``, and the process that holds it), instead of the two runs
    tearing each other's staging apart. The lock is the kernel's (flock), released when a killed
    process dies, so a kill never blocks the next run."""
    import fcntl

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    lock_path = path.parent / f".{path.name}.lock"
    handle = open(lock_path, "a+")  # noqa: SIM115 - held for the block; never truncated before it is ours
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        handle.seek(0)
        holder = handle.read().strip()
        handle.close()  # the running one owns the lock file
        raise IfqaError(f"{what} (process {holder})" if holder.isdigit() else what, path) from None
    try:
        handle.seek(0)
        handle.truncate()
        handle.write(str(os.getpid()))
        handle.flush()  # a full disk fails here: the lock file goes too (finally), as after the block
        yield
    finally:
        with contextlib.suppress(FileNotFoundError):
            lock_path.unlink()  # still holding the lock, so no other run is between open and lock
        handle.close()


def umask_modes(path: str | Path) -> None:
    """Give a staged output (a file, or a folder and all it holds) the modes the user's umask gives new
    files: ``mkdtemp`` makes folders 0700, and libraries stage their own files 0600 (transformers'
    ``model.safetensors``), which would keep a colleague on a shared filesystem out. Called once, just
    before a staged output is renamed into place."""
    mask = os.umask(0)
    os.umask(mask)
    path = Path(path)
    folders = [path] if path.is_dir() else []
    files = [] if folders else [path]
    for parent, dirs, names in os.walk(path) if folders else ():
        folders += [Path(parent) / d for d in dirs]
        files += [Path(parent) / n for n in names]
    for folder in folders:
        os.chmod(folder, 0o777 & ~mask)
    for file in files:
        if not file.is_symlink():
            os.chmod(file, (0o777 if os.access(file, os.X_OK) else 0o666) & ~mask)


@contextlib.contextmanager
def atomic_dir(path: str | Path) -> Iterator[Path]:
    """A temporary folder beside ``path``, put in its place (``publish_dir``) only when the block succeeds."""
    path = settled(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=staging_prefix(path), suffix=".tmp", dir=path.parent))
    try:
        yield tmp
        publish_dir(tmp, path)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


@contextlib.contextmanager
def files_into(folder: str | Path) -> Iterator[Path]:
    """A staging folder beside ``folder`` whose files are moved into ``folder`` (made if need be), with
    the user's umask modes, only when the block succeeds: a failure leaves ``folder`` as it was and no
    staging behind. The folder's other files are never touched (unlike ``atomic_dir``, which replaces
    the whole folder: for an output folder a user may have named with other files in it)."""
    folder = Path(folder)
    folder.parent.mkdir(parents=True, exist_ok=True)
    stage = Path(tempfile.mkdtemp(prefix=staging_prefix(folder), suffix=".tmp", dir=folder.parent))
    try:
        yield stage
        umask_modes(stage)
        folder.mkdir(exist_ok=True)
        for path in sorted(stage.iterdir()):
            os.replace(path, folder / path.name)
    finally:
        shutil.rmtree(stage, ignore_errors=True)


def publish_dir(staged: str | Path, path: str | Path) -> None:
    """Put the complete folder ``staged`` at ``path``, with the user's umask modes. A folder already
    there is moved aside first and removed last, so at every instant one whole version is in place or,
    for a process killed between the two renames, aside, where ``settled`` puts it back: a kill never
    costs the version that was there (a rerun that redoes the last save finds one)."""
    staged, path = Path(staged), Path(path)
    umask_modes(staged)
    old = aside(path)
    if path.is_dir():
        shutil.rmtree(old, ignore_errors=True)
        path.rename(old)
    os.replace(staged, path)
    if old.is_dir():  # renamed to staging first: a removal a kill cuts short is never put back
        trash = old.rename(path.with_name(f"{staging_prefix(path)}replaced.tmp"))
        shutil.rmtree(trash, ignore_errors=True)


def settled(path: str | Path) -> Path:
    """``path`` once a swap a kill cut short (``publish_dir``) is settled: the folder moved aside comes
    back where none is in place; one left beside a folder in place goes. Called by the writers of such a
    folder (a build, a training run) before they look at it; readers only say where it is (a reader that
    moved it could meet a writer between its two renames)."""
    path = Path(path)
    old = aside(path)
    with contextlib.suppress(FileNotFoundError):  # another rank or process settled it first
        if old.is_dir():
            if path.exists():
                shutil.rmtree(old, ignore_errors=True)
            else:
                old.rename(path)
    return path


def aside(path: str | Path) -> Path:
    """Where ``publish_dir`` keeps the folder it replaces until the new one is in place."""
    path = Path(path)
    return path.with_name(f".{path.name}.replaced")


def staging_prefix(path: str | Path) -> str:
    """``.<name>.<pid>.``: the prefix of a staging file or folder beside ``path``. Staging left by a
    process that no longer runs (killed with SIGKILL, a machine that went down) is removed first, so
    the next run of the same command leaves nothing a user could mistake for output."""
    path = Path(path)
    pattern = re.compile(re.escape(f".{path.name}.") + r"(\d+)\..*\.tmp$")
    _remove_stale(path.parent.glob(f".{glob.escape(path.name)}.*.tmp"), pattern)
    return f".{path.name}.{os.getpid()}."


def sweep_staging(folder: str | Path) -> None:
    """Remove every staging file or folder (``staging_prefix``'s: ``.<name>.<pid>.<random>.tmp``, or
    ``...<random>.old.tmp`` moved aside) that a process no longer running left in ``folder``: for a
    command that finds its work done and so stages nothing itself."""
    _remove_stale(Path(folder).glob(".*.tmp"), re.compile(r"^\..+\.(\d+)\.[^.]+(?:\.old)?\.tmp$"))


def remove_path(path: str | Path) -> None:
    """Remove a file, a link (a link to a folder, or a loop, is the link: never what it points at) or a
    folder with what it holds; nothing there is not an error."""
    path = Path(path)
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        with contextlib.suppress(FileNotFoundError, IsADirectoryError, PermissionError):
            path.unlink()


def _remove_stale(candidates: Iterable[Path], pattern: re.Pattern) -> None:
    for leftover in candidates:
        match = pattern.match(leftover.name)
        if match and not _alive(int(match.group(1))):
            if leftover.is_dir() and not leftover.is_symlink():
                shutil.rmtree(leftover, ignore_errors=True)
            else:
                with contextlib.suppress(OSError):  # a sweep never fails its command
                    leftover.unlink()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True


def write_jsonl(path: str | Path, records: Iterable[Any]) -> int:
    """Write records as JSON Lines atomically; returns how many were written."""
    count = 0
    with atomic_write(path) as handle:
        for record in records:
            handle.write(json.dumps(record, ensure_ascii=False) + "\n")
            count += 1
    return count


def write_json(path: str | Path, obj: Any) -> None:
    """Write one JSON document atomically, indented for people to read."""
    with atomic_write(path) as handle:
        json.dump(obj, handle, ensure_ascii=False, indent=2)
        handle.write("\n")
