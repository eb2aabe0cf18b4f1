"""Multistream bz2 dumps: byte ranges that the workers decompress, so decompression scales with them.

Wikipedia's ``pages-articles-multistream.xml.bz2`` is a series of independent bz2 streams (the
``<siteinfo>`` header, then 100 pages per stream, then the closing tag). The reading process only
scans the compressed bytes for where streams start and hands out ``Segment`` byte ranges; each
worker decompresses its own and splits it into ``<page>`` records. Files whose streams end inside
a page (pbzip2 cuts every 900 kB of input) work too.
"""

from __future__ import annotations

import bz2
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from ifqa.errors import IfqaError

#: A bz2 stream begins "BZh" + block size digit + the block magic (pi in BCD) at a byte boundary,
#: or, empty, directly with the end-of-stream magic (sqrt(pi)).
_STREAM_START = re.compile(rb"BZh[1-9](?:1AY&SY|\x17rE8P\x90)")
_SIGNATURE = 10
#: Compressed bytes per segment: about 4 MB of XML, a second or two of a worker's time.
SEGMENT_BYTES = 1 << 20


@dataclass(frozen=True)
class Segment:
    """Compressed bytes ``[start, end)`` of a multistream dump, starting at a stream boundary.

    Its records are the pages that *begin* inside it; a page cut by ``end`` (possible in files
    compressed in blocks by pbzip2, never in Wikipedia's own dumps) is completed by
    decompressing on past ``end``, and the next segment skips that page's tail.
    """

    path: Path
    start: int
    end: int
    last: bool

    def records(self) -> list[bytes]:
        with open(self.path, "rb") as handle:
            handle.seek(self.start)
            xml = self._decompress(handle.read(self.end - self.start))
            pages: list[bytes] = []
            position = xml.find(_OPEN)
            while position >= 0:
                close = xml.find(_CLOSE, position)
                if close < 0:  # the page goes on in the next segment
                    pages.append(self._complete(xml[position:], handle))
                    break
                close += len(_CLOSE)
                pages.append(xml[position:close])
                position = xml.find(_OPEN, close)
            else:
                cut = next((n for n in range(len(_OPEN) - 1, 0, -1) if xml.endswith(_OPEN[:n])), 0)
                if cut and not self.last:  # "<pa" + "ge>": the segment may end inside a page's first tag
                    page = self._complete(xml[-cut:], handle)
                    if page is not None:
                        pages.append(page)
        if self.last and b"</mediawiki>" not in xml[-64:]:
            raise IfqaError("XML ends before </mediawiki> (truncated or malformed dump)", self.path)
        return pages

    def _decompress(self, compressed: bytes) -> bytes:
        try:
            return bz2.decompress(compressed)
        except ValueError:  # a stream cut short: only the last one can be
            raise IfqaError("compressed data ends early (truncated file?)", self.path) from None
        except OSError as exc:
            raise IfqaError(f"corrupt bz2 data in bytes {self.start}-{self.end} ({exc})", self.path) from None

    def _complete(self, head: bytes, handle: BinaryIO) -> bytes | None:
        """``head`` and what follows it past ``end``, up to the first ``</page>`` after its start;
        None when ``head`` + what follows turns out not to open a page ("<" + "/mediawiki>")."""
        handle.seek(self.end)
        data = bytearray(head)
        searched = 0
        try:
            with bz2.BZ2File(handle) as reader:
                while (close := data.find(_CLOSE, searched)) < 0:
                    if not data.startswith(_OPEN[: len(data)]):
                        return None
                    searched = max(0, len(data) - len(_CLOSE))
                    chunk = reader.read(1 << 20)
                    if not chunk:
                        raise IfqaError("ends inside a <page> (truncated file?)", self.path)
                    data += chunk
        except EOFError:
            raise IfqaError("compressed data ends early (truncated file?)", self.path) from None
        except OSError as exc:
            raise IfqaError(f"corrupt bz2 data after byte {self.end} ({exc})", self.path) from None
        if not data.startswith(_OPEN):  # the "<" was another tag's
            return None
        return bytes(data[: close + len(_CLOSE)])


_OPEN, _CLOSE = b"<page>", b"</page>"


def stream_starts(path: Path, read_size: int = 8 << 20) -> Iterator[int]:
    """Byte offsets where a bz2 stream starts, in file order, read ``read_size`` bytes at a time."""
    with open(path, "rb") as handle:
        offset, carry = 0, b""
        while chunk := handle.read(read_size):
            data = carry + chunk  # the carry is one byte shorter than a signature: every match here is new
            for match in _STREAM_START.finditer(data):
                yield offset - len(carry) + match.start()
            offset += len(chunk)
            carry = data[-(_SIGNATURE - 1) :]


def segments(path: Path, progress: Callable[[int], None] | None = None) -> Iterator[Segment]:
    """Consecutive streams grouped into segments of about ``SEGMENT_BYTES``, covering the whole file.

    The last segment holds at least the last two streams, so that it sees ``</mediawiki>`` whole
    even where a pbzip2-style file cuts the tag between its last two streams.
    """
    size = path.stat().st_size
    start, ready, last_stream = None, None, 0
    for offset in stream_starts(path):
        if start is None:
            if offset != 0:
                raise IfqaError("is not a bz2 file from its first byte", path)
            start = offset
        elif offset - start >= SEGMENT_BYTES:
            if ready is not None:
                yield _handed_out(ready, progress)
            ready, start = Segment(path, start, offset, last=False), offset
        last_stream = offset
    if start is None:
        return
    if ready is not None and last_stream == start:  # the final segment would be one stream: join the two
        ready, start = None, ready.start
    if ready is not None:
        yield _handed_out(ready, progress)
    yield _handed_out(Segment(path, start, size, last=True), progress)


def _handed_out(segment: Segment, progress: Callable[[int], None] | None) -> Segment:
    if progress is not None:
        progress(segment.end)  # compressed bytes handed to the workers so far
    return segment


def is_multistream(path: Path, limit: int = 2 << 20) -> bool:
    """True when the first bz2 stream ends within the first ``limit`` bytes and another one follows.

    Wikipedia's multistream dumps start with a stream holding only ``<siteinfo>`` (a few kB), and
    pbzip2 writes a stream per 900 kB block (a few hundred kB compressed); a single-stream file is
    given up on after ``limit`` (a quarter of a second of decompression).
    """
    decompressor = bz2.BZ2Decompressor()
    with open(path, "rb") as handle:
        while not decompressor.eof:
            chunk = handle.read(1 << 18)
            if not chunk or handle.tell() > limit:
                return False
            try:
                decompressor.decompress(chunk)  # output discarded: only where the stream ends matters
            except OSError:
                return False  # corrupt: the ordinary reader reports it
        rest = decompressor.unused_data + handle.read(_SIGNATURE)
    return bool(_STREAM_START.match(rest))
