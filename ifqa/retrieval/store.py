"""Random access to the passages of a collection without loading it: byte offsets into the file.

An index keeps 8 bytes per passage (its line's offset) and reads title and text from the corpus
file on demand (``os.pread``), so 21M passages cost 170 MB of offsets, not a copy of the text: the
kernel's page cache holds what was read, and none of it counts as this process's memory (through an
mmap, every page a run touched stayed resident in it: 0.5 GB of wiki-800k for one dev run).
"""

from __future__ import annotations

import json
import mmap
import os
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from ifqa.artifacts import TSV_FIELDS_HINT, TSV_HEADER, is_id
from ifqa.errors import IfqaError
from ifqa.io import BOM, SURROGATE_PROBLEM, nfc, unpaired_surrogate


def iter_corpus(path: str | Path) -> Iterator[tuple[int, dict]]:
    """Yield ``(byte offset, passage)`` for a JSONL or DPR TSV passage file (uncompressed)."""
    path = Path(path)
    if not path.exists():
        raise IfqaError("no such file", path)
    if path.suffix == ".gz":
        raise IfqaError("index an uncompressed passage file (gunzip it first)", path)
    tsv = path.name.endswith(".tsv")
    with open(path, "rb") as handle:
        offset = 0
        for number, line in enumerate(handle, start=1):
            start, offset = offset, offset + len(line)
            if number == 1:  # a byte-order mark is no part of the header or first passage (_parse drops it)
                line = line.removeprefix(BOM)
            if not line.strip() or (tsv and number == 1 and line.rstrip(b"\r\n").decode() == TSV_HEADER):
                continue
            yield start, _parse(line, tsv, path, number)


def _parse(line: bytes, tsv: bool, path: Path, number: int) -> dict:
    line = line.removeprefix(BOM)  # the first line of a file saved with a byte-order mark, read by position too
    try:
        if tsv:
            fields = line.decode("utf-8").rstrip("\r\n").split("\t")
            if len(fields) != 3:
                raise ValueError(f"{TSV_FIELDS_HINT} (this one has {len(fields)})")
            pid, text, title = fields
            return {"id": pid, "title": nfc(title), "text": nfc(text)}
        record = json.loads(line)
        if not isinstance(record, dict) or "id" not in record or not isinstance(record.get("text"), str):
            raise ValueError("needs 'id' and a string 'text'")
        if not is_id(record["id"]):
            raise ValueError(f"'id' must be a non-empty string or an integer, got {record['id']!r}"[:160])
        if record.get("title") is not None and not isinstance(record["title"], str):
            raise ValueError("'title' must be a string")
        if not record["text"].strip():
            raise ValueError("'text' is empty")
        if unpaired_surrogate(record["text"], record.get("title") or "", str(record["id"])):
            raise ValueError(SURROGATE_PROBLEM)
        return {"id": str(record["id"]), "title": nfc(str(record.get("title") or "")), "text": nfc(record["text"])}
    except (ValueError, UnicodeDecodeError) as exc:
        raise IfqaError(f"not a passage record ({exc})", path, number) from None


class PassageStore:
    """Passages by position (0..n-1) in the collection file, read lazily."""

    def __init__(self, corpus: str | Path, offsets: np.ndarray):
        self.corpus = Path(corpus)
        if not self.corpus.exists():
            raise IfqaError("the index's collection file is missing (moved? pass --corpus)", self.corpus)
        self.offsets = offsets
        self._tsv = self.corpus.name.endswith(".tsv")
        self._file = open(self.corpus, "rb")  # noqa: SIM115 - held for the store's life, read by position
        self._size = os.fstat(self._file.fileno()).st_size

    def _read(self, start: int, end: int) -> bytes:
        return os.pread(self._file.fileno(), max(0, end - start), start)

    def __len__(self) -> int:
        return len(self.offsets)

    def check_offsets(self, samples: int = 64) -> None:
        """Cheap proof that the file is the indexed one: sampled offsets begin lines that parse as passages."""
        n = len(self.offsets)
        if n and int(self.offsets[-1]) >= self._size:
            raise IfqaError("not the collection this index was built from (shorter than its offsets)", self.corpus)
        for position in sorted({int(i) for i in np.linspace(0, n - 1, num=min(n, samples))} if n else set()):
            start = int(self.offsets[position])
            if start and self._read(start - 1, start) != b"\n":
                raise IfqaError(
                    f"not the collection this index was built from (passage {position + 1} does not start a line)",
                    self.corpus,
                )
            self[position]

    def __getitem__(self, position: int) -> dict:
        start = int(self.offsets[position])
        end = int(self.offsets[position + 1]) if position + 1 < len(self.offsets) else self._size
        line = self._read(start, end)  # up to the next passage's line (a skipped blank line may follow)
        cut = line.find(b"\n")
        return _parse(line[:cut] if cut >= 0 else line, self._tsv, self.corpus, position + 1)


def release_pages(arrays) -> None:
    """Let go of the memory-mapped pages a search read (or a build wrote): they stay in the kernel's
    page cache, but leave this process's resident memory, which would otherwise grow towards the whole
    index over a run of thousands of questions."""
    for mapped_array in arrays:
        mapped = getattr(mapped_array, "_mmap", None)
        if mapped is not None and hasattr(mapped, "madvise"):
            mapped.madvise(mmap.MADV_DONTNEED)
