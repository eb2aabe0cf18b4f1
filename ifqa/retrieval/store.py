"""Random access to the passages of a collection without loading it: byte offsets into the file.

An index keeps 8 bytes per passage (its line's offset) and reads title and text from the corpus
file on demand through mmap, so 21M passages cost 170 MB of offsets, not a copy of the text.
"""

from __future__ import annotations

import json
import mmap
from pathlib import Path
from typing import Iterator

import numpy as np

from ifqa.corpus.passages import TSV_HEADER
from ifqa.errors import IfqaError


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
            if not line.strip() or (tsv and number == 1 and line.rstrip(b"\r\n").decode() == TSV_HEADER):
                continue
            yield start, _parse(line, tsv, path, number)


def _parse(line: bytes, tsv: bool, path: Path, number: int) -> dict:
    try:
        if tsv:
            pid, text, title = line.decode("utf-8").rstrip("\r\n").split("\t")
            return {"id": pid, "title": title, "text": text}
        record = json.loads(line)
        if not isinstance(record, dict) or "id" not in record or not isinstance(record.get("text"), str):
            raise ValueError("needs 'id' and a string 'text'")
        return {"id": str(record["id"]), "title": str(record.get("title") or ""), "text": record["text"]}
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
        with open(self.corpus, "rb") as handle:
            self._map = mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ)

    def __len__(self) -> int:
        return len(self.offsets)

    def __getitem__(self, position: int) -> dict:
        start = int(self.offsets[position])
        end = self._map.find(b"\n", start)
        line = self._map[start : end if end >= 0 else len(self._map)]
        return _parse(line, self._tsv, self.corpus, position + 1)
