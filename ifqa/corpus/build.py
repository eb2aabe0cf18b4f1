"""`ifqa corpus build`: inputs -> passages file, in parallel, resumable, written atomically.

Work is cut into batches of raw records, numbered by (input, batch). Each finished batch is saved
as a part file in ``.<output>.parts/`` next to the output; a rerun of the same command skips the
parts that exist, so an interrupted build loses nothing and duplicates nothing. When every batch is
done the parts are joined, in order, into the output (atomic rename) and the parts folder goes.
"""

from __future__ import annotations

import array
import collections
import concurrent.futures
import hashlib
import json
import logging
import os
import shutil
import signal
import sys
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path

from ifqa.artifacts import manifest_path
from ifqa.corpus import multistream
from ifqa.corpus.multistream import Segment
from ifqa.corpus.passages import DEFAULT_WORDS, TSV_FIELDS_HINT, TSV_HEADER
from ifqa.corpus.sources import Source, detect, expand_inputs, open_binary, stream_records, to_passages
from ifqa.errors import IfqaError, restoring
from ifqa.io import SURROGATE_PROBLEM, atomic_write, exclusive, unpaired_surrogate, write_json
from ifqa.version import __version__

log = logging.getLogger(__name__)

DEFAULT_BATCH = 200
#: A batch also closes at this many raw bytes, so that large articles still spread over workers.
BATCH_BYTES = 1 << 20


@dataclass
class BuildSummary:
    """What a build read, skipped (by reason) and wrote."""

    records: int = 0
    kept: int = 0
    skipped: dict[str, int] = field(default_factory=dict)
    passages: int = 0
    words: int = 0
    seconds: float = 0.0

    def add(self, other: dict) -> None:
        self.records += other["records"]
        self.kept += other["kept"]
        self.passages += other["passages"]
        self.words += other["words"]
        for reason, count in other["skipped"].items():
            self.skipped[reason] = self.skipped.get(reason, 0) + count


def build(
    inputs: list[str | Path],
    output: str | Path,
    words: int = DEFAULT_WORDS,
    workers: int = 1,
    format: str | None = None,
    batch_size: int = DEFAULT_BATCH,
    progress: bool = True,
) -> BuildSummary:
    """Build the passage file ``output`` (DPR TSV when it ends in ``.tsv``, else JSONL)."""
    if words < 1:
        raise IfqaError("--words must be at least 1")
    output = Path(output)
    tsv = output.name.endswith(".tsv")
    sources = [detect(path, format) for path in expand_inputs(inputs)]
    parts = output.parent / f".{output.name}.parts"
    settings = {
        "ifqa": __version__,
        "words": words,
        "tsv": tsv,
        "batch_size": batch_size,
        "batch_bytes": BATCH_BYTES,
        "segment_bytes": multistream.SEGMENT_BYTES,
        "inputs": [
            {
                "path": str(s.path.resolve()),
                "format": s.format,
                "multistream": s.multistream,
                "bytes": s.size,
                "mtime": int(s.path.stat().st_mtime),
            }
            for s in sources
        ],
    }
    if workers > 1:
        check_file_limit(workers)  # before anything is made
    with exclusive(output, "another ifqa corpus build is writing this output"):  # the second of two says so
        if parts.exists():
            _prepare_parts(parts, settings)  # an interrupted build's: checked, then resumed
        started, cpu_started = time.time(), _cpu_seconds()
        try:
            _run_batches(sources, parts, words, tsv, workers, batch_size, progress, settings)
            joining = _cpu_seconds()
            summary, checksum = _join_parts(parts, output, tsv)
            try:
                _refuse_dropped(sources, summary, words)
            except IfqaError:
                output.unlink(missing_ok=True)
                raise
        except IfqaError:
            shutil.rmtree(parts, ignore_errors=True)  # bad input: leave nothing behind
            raise
        summary.seconds = round(time.time() - started, 2)
        finished = _cpu_seconds()
        cpu = {  # this run's (a resumed run counts only its own work): what a projection to more cores needs
            "reading_process": round(joining[0] - cpu_started[0], 2),
            "workers": round(joining[1] - cpu_started[1], 2),
            "joining": round(finished[0] - joining[0], 2),
        }
        write_json(
            manifest_path(output),
            {
                **settings,
                "output": str(output.resolve()),
                "sha256": checksum,
                "workers": workers,
                "summary": asdict(summary),
                "cpu_seconds": cpu,
            },
        )
        shutil.rmtree(parts, ignore_errors=True)
        return summary


def _refuse_dropped(sources: list, summary: BuildSummary, words: int) -> None:
    """A build that kept nothing is an error (the wrong --format, say), and so is a passage file with a
    record that is not a passage: passages are taken as they are, never silently dropped."""
    passage_formats = ("passages-jsonl", "passages-tsv")
    if summary.skipped.get("malformed record"):
        for source in sources:
            if source.format in passage_formats and (line := _first_malformed(source, words)):
                hint = (
                    f" ({TSV_FIELDS_HINT})"
                    if source.format == "passages-tsv"
                    else " (a JSON object with 'id' and a string 'text')"
                )
                if _holds_surrogate(source, line):
                    hint = f": it {SURROGATE_PROBLEM}"
                raise IfqaError(f"not a passage record{hint}", source.path, line)
    if summary.passages == 0:
        reasons = ", ".join(f"{count} {reason}" for reason, count in summary.skipped.items()) or "none read"
        where = sources[0].path if len(sources) == 1 else None
        raise IfqaError(
            f"no passages: {summary.records} record(s), none kept ({reasons}); is this the right input "
            f"and --format ({', '.join(sorted({s.format for s in sources}))})?",
            where,
        )


def _holds_surrogate(source, number: int) -> bool:
    """Whether line ``number`` of a passage file is a record whose text is not Unicode (the error path only)."""
    import itertools

    with open_binary(source) as handle:
        line = next(itertools.islice(handle, number - 1, None), b"")
    try:
        record = json.loads(line)
    except ValueError:
        return False
    return isinstance(record, dict) and unpaired_surrogate(*(str(v) for v in record.values()))


def _first_malformed(source, words: int) -> int | None:
    """The line of the first record of a passage file that is not a passage (the error path only)."""
    with open_binary(source) as handle:
        for number, line in enumerate(handle, start=1):
            line = line.rstrip(b"\n")
            if number == 1:
                line = line.removeprefix(b"\xef\xbb\xbf")
                if source.format == "passages-tsv" and line.rstrip(b"\r").decode("utf-8", "replace") == TSV_HEADER:
                    continue
            if line.strip() and to_passages(source.format, line, words)[1] == "malformed record":
                return number
    return None


def _prepare_parts(parts: Path, settings: dict) -> None:
    settings_file = parts / "settings.json"
    if parts.exists():
        try:
            previous = json.loads(settings_file.read_text())
        except (OSError, ValueError):
            previous = None
        if previous != settings:
            raise IfqaError(
                "an interrupted build with other inputs or settings left this folder; rerun that command "
                "or delete the folder",
                parts,
            )
        done = sorted(parts.glob("*.part"))
        for part in done:  # each with its counts and ids, as this code wrote them
            with restoring(part, f"delete {parts} to build from the start"):
                BuildSummary().add(json.loads(part.with_suffix(".stats.json").read_text()))
                if part.with_suffix(".ids").stat().st_size % array.array("Q").itemsize:
                    raise ValueError("its .ids file is cut short")
        log.info("resuming: %d finished batches found in %s", len(done), parts)
        return
    settings_file.parent.mkdir(parents=True)
    write_json(settings_file, settings)


def _batches(source: Source, batch_size: int, progress) -> Iterator[list[bytes] | Segment]:
    if source.multistream:  # the workers decompress
        yield from multistream.segments(source.path, progress)
        return
    batch: list[bytes] = []
    size = 0
    for raw in stream_records(source, progress):
        batch.append(raw)
        size += len(raw)
        if len(batch) == batch_size or size >= BATCH_BYTES:
            yield batch
            batch, size = [], 0
    if batch:
        yield batch


def _run_batches(
    sources: list[Source], parts: Path, words: int, tsv: bool, workers: int, batch_size: int, show: bool, settings
) -> None:
    """Every batch not finished yet into its part; the parts folder is made with the first finished
    batch (a build that fails before one finishes, a pool that cannot start, leaves nothing)."""
    from tqdm import tqdm

    bar = tqdm(
        total=sum(s.size for s in sources), unit="B", unit_scale=True, desc="corpus", disable=not show, smoothing=0.1
    )
    counts = collections.Counter()
    executor = (
        concurrent.futures.ProcessPoolExecutor(workers, initializer=_worker_setup, initargs=(os.getpid(),))
        if workers > 1
        else None
    )
    pending: collections.deque = collections.deque()

    def finish(name: str, result: tuple[str, dict, bytes]) -> None:
        lines, stats, id_hashes = result
        if not parts.exists():
            _prepare_parts(parts, settings)
        write_json(parts / f"{name}.stats.json", stats)
        with atomic_write(parts / f"{name}.ids", "wb") as handle:
            handle.write(id_hashes)
        with atomic_write(parts / f"{name}.part") as handle:  # last: a part's presence marks the batch done
            handle.write(lines)
        counts.update(records=stats["records"], passages=stats["passages"])
        bar.set_postfix(records=counts["records"], passages=counts["passages"], refresh=False)

    try:
        for index, source in enumerate(sources):
            position = {"last": 0}

            def advance(now: int, position=position) -> None:
                bar.update(now - position["last"])
                position["last"] = now

            for batch_index, batch in enumerate(_batches(source, batch_size, advance)):
                name = f"{index:05d}-{batch_index:09d}"
                if (parts / f"{name}.part").exists():
                    continue
                if executor is None:
                    finish(name, process_batch(source.format, words, tsv, batch))
                    continue
                pending.append((name, executor.submit(process_batch, source.format, words, tsv, batch)))
                while len(pending) >= 2 * workers:
                    done_name, future = pending.popleft()
                    finish(done_name, future.result())
        while pending:
            done_name, future = pending.popleft()
            finish(done_name, future.result())
    finally:
        for _, future in pending:
            future.cancel()
        if executor is not None:
            failed = sys.exc_info()[0] is not None
            if failed:  # a worker that never started would be waited for forever: stop them all
                for process in list((getattr(executor, "_processes", None) or {}).values()):
                    process.kill()
            executor.shutdown(wait=not failed, cancel_futures=True)
        bar.close()


#: Descriptors a pool worker holds in this process (its pipes; measured: 2 per worker), and those
#: the build opens beside them (inputs, parts, the output).
FILES_PER_WORKER, FILES_BESIDE = 2, 8


def check_file_limit(workers: int) -> None:
    """A pool that cannot open its pipes fails in a worker and hangs the build: refuse first, in one line."""
    import resource

    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    fds = Path("/proc/self/fd")
    if soft == resource.RLIM_INFINITY or not fds.is_dir():
        return
    needed = len(list(fds.iterdir())) + FILES_PER_WORKER * workers + FILES_BESIDE
    if needed > soft:
        raise IfqaError(
            f"--workers {workers} needs about {needed} open files, and this process may open {soft}; raise the "
            "limit (ulimit -n 4096) or use fewer --workers"
        )


def process_batch(format: str, words: int, tsv: bool, batch: list[bytes] | Segment) -> tuple[str, dict, bytes]:
    """Raw records (or a multistream segment's) -> output lines, counts and the passage ids' hashes
    (for the duplicate check at the end). Runs in a worker process."""
    if isinstance(batch, Segment):
        batch = batch.records()
    lines: list[str] = []
    id_hashes = array.array("Q")
    skipped: collections.Counter = collections.Counter()
    kept = passages = total_words = 0
    for raw in batch:
        produced, reason = to_passages(format, raw, words)
        if reason:
            skipped[reason] += 1
            continue
        kept += 1
        for passage in produced:
            lines.append(passage.to_line(tsv))
            id_hashes.append(_id_hash(passage.id.encode()))
        # every passage but a record's last holds exactly `words` words (one passage per record when not split)
        total_words += (len(produced) - 1) * words + len(produced[-1].text.split())
        passages += len(produced)
    stats = {"records": len(batch), "kept": kept, "skipped": dict(skipped), "passages": passages, "words": total_words}
    return "".join(lines), stats, id_hashes.tobytes()


def _join_parts(parts: Path, output: Path, tsv: bool) -> tuple[BuildSummary, str]:
    """Concatenate the parts in order into ``output``; fail on a repeated passage id."""
    summary = BuildSummary()
    digest = hashlib.sha256()
    ids = array.array("Q")  # 8 bytes per passage: the duplicate check stays small at 27M passages
    with atomic_write(output, "wb") as out:
        if tsv:
            header = (TSV_HEADER + "\n").encode()
            out.write(header)
            digest.update(header)
        for part in sorted(parts.glob("*.part")):
            summary.add(json.loads((part.with_suffix(".stats.json")).read_text()))
            ids.frombytes(part.with_suffix(".ids").read_bytes())
            with open(part, "rb") as handle:
                while chunk := handle.read(1 << 22):
                    out.write(chunk)
                    digest.update(chunk)
        _check_unique(ids, parts, tsv)
    return summary, digest.hexdigest()


def _id_hash(passage_id: bytes) -> int:
    return int.from_bytes(hashlib.blake2b(passage_id, digest_size=8).digest(), "little")


def _check_unique(ids: array.array, parts: Path, tsv: bool) -> None:
    import numpy as np

    hashes = np.sort(np.frombuffer(ids, dtype=np.uint64))
    repeated = hashes[1:][hashes[1:] == hashes[:-1]]
    if not repeated.size:
        return
    target = int(repeated[0])
    for part in sorted(parts.glob("*.part")):
        with open(part, "rb") as handle:
            for line in handle:
                passage_id = line.split(b"\t", 1)[0] if tsv else json.loads(line)["id"].encode()
                if _id_hash(passage_id) == target:
                    raise IfqaError(
                        f"passage id {passage_id.decode()!r} occurs more than once: two inputs hold the same "
                        "article or passage; build them separately or drop one"
                    )


def _cpu_seconds() -> tuple[float, float]:
    """User + system CPU seconds of this process and of its finished worker processes."""
    try:
        import resource
    except ImportError:  # not on Windows: this process only
        return time.process_time(), 0.0
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime, children.ru_utime + children.ru_stime


def _worker_setup(parent: int) -> None:
    """Worker set-up: Ctrl-C is the parent's to handle, and a worker dies with its parent, even
    one killed with SIGKILL (Linux ``PR_SET_PDEATHSIG``; elsewhere the pool's own shutdown)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if sys.platform.startswith("linux"):
        import ctypes

        try:
            ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # 1 = PR_SET_PDEATHSIG
        except OSError:
            pass
        if os.getppid() != parent:  # the parent died before the call above took effect
            os._exit(1)
