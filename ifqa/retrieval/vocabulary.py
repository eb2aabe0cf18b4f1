"""A BM25 index's term -> id lookup, sorted and memory-mapped.

bm25s keeps its vocabulary as a JSON object that loads into a Python dict (and a set of its ids):
about 100 bytes a term, 1.3 GB and 8 s to open at 12M terms (6.2M passages), held for the whole
run although a question touches a dozen terms. Written beside it at build time: the terms' UTF-8
bytes in sorted order (``vocab.terms.bin``), where each starts (``vocab.offsets.npy``, one more
than there are terms) and each term's id (``vocab.ids.npy``); a lookup is a binary search that
reads a few pages. Python orders strings by code point, which is UTF-8's byte order, so the sort
done on strings is the order the bytes are searched in.
"""

from __future__ import annotations

import bisect
from collections.abc import Mapping
from pathlib import Path

import numpy as np

from ifqa.io import atomic_write

TERMS, OFFSETS, IDS = "vocab.terms.bin", "vocab.offsets.npy", "vocab.ids.npy"


def write_sorted(folder: Path, vocabulary: Mapping[str, int]) -> None:
    """The three files of ``vocabulary`` (the empty term, bm25s's placeholder, left out), written a
    term at a time: the build's peak memory gains the sorted list of terms, not their bytes too."""
    terms = sorted(term for term in vocabulary if term)
    offsets, ids = np.zeros(len(terms) + 1, dtype=np.int64), np.empty(len(terms), dtype=np.int32)
    with atomic_write(folder / TERMS, "wb") as handle:
        for position, term in enumerate(terms):
            encoded = term.encode("utf-8")
            handle.write(encoded)
            offsets[position + 1] = offsets[position] + len(encoded)
            ids[position] = vocabulary[term]
    for name, array in ((OFFSETS, offsets), (IDS, ids)):
        with atomic_write(folder / name, "wb") as handle:
            np.save(handle, array)


def has_sorted(folder: Path) -> bool:
    return all((folder / name).is_file() for name in (TERMS, OFFSETS, IDS))


class SortedVocabulary:
    """``term in vocabulary`` and ``vocabulary.get(term)`` over the memory-mapped files."""

    def __init__(self, folder: Path):
        self._offsets = np.load(folder / OFFSETS, mmap_mode="r")
        self._ids = np.load(folder / IDS, mmap_mode="r")
        size = int(self._offsets[-1]) if len(self._offsets) else 0
        self._terms = np.memmap(folder / TERMS, dtype=np.uint8, mode="r") if size else np.zeros(0, np.uint8)
        if len(self._offsets) != len(self._ids) + 1 or len(self._terms) != size:
            raise ValueError(f"{folder}: the sorted vocabulary's files do not agree (cut short?)")

    def __len__(self) -> int:
        return len(self._ids)

    def __getitem__(self, position: int) -> bytes:  # the sorted terms, for bisect
        return self._terms[self._offsets[position] : self._offsets[position + 1]].tobytes()

    def get(self, term: str, default: int | None = None) -> int | None:
        key = term.encode("utf-8")
        position = bisect.bisect_left(self, key)
        return int(self._ids[position]) if position < len(self) and self[position] == key else default

    def __contains__(self, term: object) -> bool:
        return isinstance(term, str) and self.get(term) is not None
