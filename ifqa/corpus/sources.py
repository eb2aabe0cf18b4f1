"""Input formats of the passage builder: detection and streaming of raw records.

Each format streams *raw* records (bytes) in bounded memory from the reading process; turning a
raw record into passages (``to_passages``) happens in the worker processes. Multistream bz2
dumps are not even decompressed by the reading process (see ``multistream``). A broken record
is reported with a skip reason; a broken file raises IfqaError.
"""

from __future__ import annotations

import bz2
import gzip
import json
import re
import xml.etree.ElementTree as ET
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from ifqa.corpus import wikitext
from ifqa.corpus.multistream import is_multistream
from ifqa.corpus.passages import TSV_HEADER, Passage, split_passages
from ifqa.errors import IfqaError
from ifqa.io import BOM, unpaired_surrogate

FORMATS = ("xml", "wikiextractor-json", "wikiextractor-doc", "passages-jsonl", "passages-tsv")
_CHUNK = 1 << 20


@dataclass(frozen=True)
class Source:
    """One input file with its detected format and compression."""

    path: Path
    format: str
    compression: str  # "bz2", "gz" or ""
    multistream: bool = False  # bz2 made of several streams: workers decompress byte ranges

    @property
    def size(self) -> int:
        return self.path.stat().st_size


# --- detection -------------------------------------------------------------------------------


def expand_inputs(inputs: list[str | Path]) -> list[Path]:
    """Files as given; a folder (WikiExtractor's AA/wiki_00 tree) becomes its files in sorted order."""
    paths: list[Path] = []
    for item in map(Path, inputs):
        if item.is_dir():
            paths.extend(sorted(p for p in item.rglob("*") if p.is_file() and not p.name.startswith(".")))
        elif item.exists():
            paths.append(item)
        else:
            raise IfqaError("no such file or folder", item)
    if not paths:
        raise IfqaError("no input files")
    return paths


def detect(path: Path, format: str | None = None) -> Source:
    """Compression from the magic bytes, format from the content (``format`` overrides the latter).

    A name that promises one compression or format while the content is another is an error.
    """
    with open(path, "rb") as handle:
        magic = handle.read(3)
    compression = "bz2" if magic == b"BZh" else "gz" if magic[:2] == b"\x1f\x8b" else ""
    for suffix, expected in ((".bz2", "bz2"), (".gz", "gz")):
        if path.name.endswith(suffix) and compression != expected:
            raise IfqaError(f"named {suffix} but is not {expected}-compressed", path)
    if format is not None and format not in FORMATS:
        raise IfqaError(f"unknown format {format!r}; choose from {', '.join(FORMATS)}")
    head = _head(Source(path, "", compression))
    format = format or _sniff(head, path)
    multistream = compression == "bz2" and format == "xml" and is_multistream(path)
    return Source(path, format, compression, multistream)


def _head(source: Source) -> bytes:
    """The first 64 kB, or the whole first line when the file starts like JSON (one article can be MBs)."""
    try:
        with open_binary(source) as handle:
            head = handle.read(1 << 16)
            if head.lstrip(b"\xef\xbb\xbf").lstrip().startswith(b"{") and b"\n" not in head:
                head += handle.readline(1 << 28)
            return head
    except (OSError, EOFError, zlib.error) as exc:
        raise _read_error(exc, source) from None


def _read_error(exc: BaseException, source: Source) -> IfqaError:
    if isinstance(exc, EOFError):
        return IfqaError("compressed data ends early (truncated file?)", source.path)
    return IfqaError(f"corrupt {source.compression or 'file'} data ({exc})", source.path)


def _sniff(head: bytes, path: Path) -> str:
    text = head.lstrip(b"\xef\xbb\xbf").lstrip()
    if text.startswith(b"<mediawiki") or (text.startswith(b"<?xml") and b"<mediawiki" in text):
        return "xml"
    if text.startswith(b"<doc "):
        return "wikiextractor-doc"
    if text.startswith(b"{"):
        first = text.split(b"\n", 1)[0]
        try:
            record = json.loads(first)
        except ValueError:
            record = None
        if isinstance(record, dict) and "text" in record:
            return "wikiextractor-json" if "url" in record else "passages-jsonl"
        raise IfqaError("starts like JSON but its first line is not an article or passage record", path)
    if text.startswith(TSV_HEADER.encode()):
        return "passages-tsv"
    kinds = "MediaWiki XML, WikiExtractor JSON or <doc> text, passages JSONL or DPR TSV"
    raise IfqaError(f"not a recognized input ({kinds}); use --format to say which", path)


_OPENERS = {"bz2": bz2.open, "gz": gzip.open}  # bz2 reads multistream dumps too


def open_binary(source: Source) -> BinaryIO:
    return _OPENERS.get(source.compression, open)(source.path, "rb")


# --- streaming raw records -------------------------------------------------------------------


def stream_records(source: Source, progress: Callable[[int], None] | None = None) -> Iterator[bytes]:
    """Raw records of one input in file order; ``progress`` gets compressed bytes consumed so far."""
    reader = {"xml": _xml_pages, "wikiextractor-doc": _doc_blocks}.get(source.format, _lines)
    raw = open(source.path, "rb")
    try:
        handle: BinaryIO = _OPENERS[source.compression](raw, "rb") if source.compression else raw
        chunks = _chunks(handle, raw, source, progress)
        yield from reader(chunks, source)
    finally:
        raw.close()


def _chunks(handle: BinaryIO, raw: BinaryIO, source: Source, progress) -> Iterator[bytes]:
    first = True
    while True:
        try:
            chunk = handle.read(_CHUNK)
            if first and chunk.startswith(b"\xef\xbb\xbf"):  # a UTF-8 byte-order mark is not part of the first record
                chunk = chunk[3:]
            first = False
        except (OSError, EOFError, zlib.error) as exc:
            raise _read_error(exc, source) from None
        if progress is not None:
            progress(raw.tell())
        if not chunk:
            return
        yield chunk


def _lines(chunks: Iterator[bytes], source: Source) -> Iterator[bytes]:
    rest = b""
    header_checked = source.format != "passages-tsv"
    for chunk in chunks:
        lines = (rest + chunk).split(b"\n")
        rest = lines.pop()
        for line in lines:
            if not header_checked:
                header_checked = True
                line = line.removeprefix(BOM)  # a file saved with a byte-order mark: its header is still a header
                if line.rstrip(b"\r").decode("utf-8", "replace") == TSV_HEADER:
                    continue
            if line.strip():
                yield line
    if rest.strip():
        yield rest


def _delimited(chunks: Iterator[bytes], source: Source, start: bytes, end: bytes, what: str) -> Iterator[bytes]:
    buffer = b""
    position = 0
    for chunk in chunks:
        buffer = buffer[position:] + chunk
        position = 0
        while True:
            begin = buffer.find(start, position)
            if begin < 0:
                position = max(position, len(buffer) - len(start))
                break
            finish = buffer.find(end, begin)
            if finish < 0:
                position = begin
                break
            finish += len(end)
            yield buffer[begin:finish]
            position = finish
    if buffer.find(start, position) >= 0:
        raise IfqaError(f"ends inside a {what} (truncated file?)", source.path)


def _xml_pages(chunks: Iterator[bytes], source: Source) -> Iterator[bytes]:
    closed = False

    def watch(stream: Iterator[bytes]) -> Iterator[bytes]:
        nonlocal closed
        tail = b""
        for chunk in stream:
            tail = (tail + chunk)[-64:]
            yield chunk
        closed = b"</mediawiki>" in tail

    yield from _delimited(watch(chunks), source, b"<page>", b"</page>", "<page>")
    if not closed:
        raise IfqaError("XML ends before </mediawiki> (truncated or malformed dump)", source.path)


def _doc_blocks(chunks: Iterator[bytes], source: Source) -> Iterator[bytes]:
    yield from _delimited(chunks, source, b"<doc ", b"</doc>", "<doc>")


# --- raw record -> passages (runs in worker processes) ----------------------------------------

_DOC_HEADER = re.compile(r"<doc\s+([^>]*)>")
_DOC_ATTRIBUTE = re.compile(r'(\w+)="([^"]*)"')


def to_passages(format: str, raw: bytes, words: int) -> tuple[list[Passage], str | None]:
    """Passages of one raw record, or ``([], reason)`` when the record is skipped. A record holding an
    unpaired surrogate (JSON's ``"\\ud800"``) is no text: a passage file's is refused (as malformed,
    named by its line), an article's skipped and counted."""
    passages, reason = _record_passages(format, raw, words)
    if passages and unpaired_surrogate(*(part for p in passages for part in p)):
        return [], "malformed record" if format.startswith("passages-") else "invalid unicode"
    return passages, reason


def _record_passages(format: str, raw: bytes, words: int) -> tuple[list[Passage], str | None]:
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return [], "bad encoding"
    if format == "xml":
        return _page_passages(text, words)
    if format == "wikiextractor-doc":
        header = _DOC_HEADER.match(text)
        if header is None:
            return [], "malformed record"
        attributes = dict(_DOC_ATTRIBUTE.findall(header.group(1)))
        body = text[header.end() : -len("</doc>")].strip("\n")
        title = _unescape(attributes.get("title", ""))
        first, _, rest = body.partition("\n")
        if _unescape(first.strip()) == title:
            body = rest
        return _article_passages(attributes.get("id", ""), title, body, words)
    if format == "passages-tsv":
        fields = text.rstrip("\r").split("\t")
        if len(fields) != 3 or not fields[0]:
            return [], "malformed record"
        return [Passage(fields[0], fields[2], fields[1])], None
    try:
        record = json.loads(text)
    except ValueError:
        return [], "malformed record"
    if not isinstance(record, dict) or not isinstance(record.get("text"), str) or "id" not in record:
        return [], "malformed record"
    if format == "passages-jsonl":
        return [Passage(str(record["id"]), str(record.get("title") or ""), record["text"])], None
    return _article_passages(str(record["id"]), str(record.get("title") or ""), record["text"], words)


def _article_passages(article_id: str, title: str, text: str, words: int) -> tuple[list[Passage], str | None]:
    if not article_id:
        return [], "malformed record"
    passages = split_passages(article_id, title, text, words)
    return (passages, None) if passages else ([], "empty")


def _unescape(value: str) -> str:
    return value.replace("&quot;", '"').replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")


def _page_passages(page: str, words: int) -> tuple[list[Passage], str | None]:
    try:
        element = ET.fromstring(page)
    except ET.ParseError:
        return [], "malformed page"
    if element.findtext("ns", "0").strip() != "0":
        return [], "not an article (namespace)"
    if element.find("redirect") is not None:
        return [], "redirect"
    title = element.findtext("title", "").strip()
    page_id = element.findtext("id", "").strip()
    revision = element.find("revision")
    markup = revision.findtext("text", "") if revision is not None else ""
    if not page_id or not title:
        return [], "malformed page"
    if markup.lstrip()[:9].upper() == "#REDIRECT":
        return [], "redirect"
    if wikitext.is_disambiguation(title, markup):
        return [], "disambiguation"
    return _article_passages(page_id, title, wikitext.clean(markup), words)
