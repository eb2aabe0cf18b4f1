"""Multistream bz2 dumps: segments found by the reading process, decompressed and split by the workers."""

import bz2

import pytest

from ifqa.corpus import multistream, sources
from ifqa.errors import IfqaError
from tests.corpus.conftest import bz2_file, wikipedia_multistream


def _segment_pages(source, monkeypatch, segment_bytes=1):
    monkeypatch.setattr(multistream, "SEGMENT_BYTES", segment_bytes)
    return [page for segment in multistream.segments(source.path) for page in segment.records()]


def test_multistream_dump_is_split_into_segments_that_workers_decompress(tmp_path, small_dump, monkeypatch):
    expected = list(sources.stream_records(sources.detect(small_dump)))
    dump = sources.detect(wikipedia_multistream(small_dump, tmp_path / "d-multistream.xml.bz2"))
    assert dump.multistream
    for segment_bytes in (1, 300, 1 << 20):  # a stream per segment, a few, one for the file
        monkeypatch.setattr(multistream, "SEGMENT_BYTES", segment_bytes)
        found = list(multistream.segments(dump.path))
        assert found[0].start == 0 and found[-1].end == dump.size and found[-1].last
        assert all(a.end == b.start for a, b in zip(found, found[1:]))
        assert [page for segment in found for page in segment.records()] == expected
    assert not sources.detect(bz2_file(small_dump, tmp_path / "one.xml.bz2")).multistream


def test_streams_cut_anywhere_still_give_every_page_once(tmp_path, small_dump, monkeypatch):
    """pbzip2-style files: streams end inside a page, inside "<page>" and inside "</page>"."""
    expected = list(sources.stream_records(sources.detect(small_dump)))
    data = small_dump.read_bytes()
    second, third = [i for i in range(len(data)) if data.startswith(b"<page>", i)][1:3]
    close = data.index(b"</page>", third)
    end = data.index(b"</mediawiki>")
    text_close = data.index(b"</text>", second)
    for cuts in (
        [second + 3],
        [close + 4],
        [second + 1, second + 40, close + 6],
        [second, close + len(b"</page>")],
        [end + 1],
        [end - 1],
        [second + 50, text_close + 1],
    ):  # a stream inside a page, ending "<"  # "<" + "/mediawiki>", "\n" + "</mediawiki>"
        dump = sources.detect(bz2_file(small_dump, tmp_path / "cut.xml.bz2", cuts=[100, *cuts]))
        assert dump.multistream
        assert _segment_pages(dump, monkeypatch) == expected, cuts


def test_broken_multistream_dumps_are_one_line_errors(tmp_path, small_dump, monkeypatch):
    path = wikipedia_multistream(small_dump, tmp_path / "d.xml.bz2")
    data = path.read_bytes()
    path.write_bytes(data[:-30])
    with pytest.raises(IfqaError, match=r"d\.xml\.bz2: compressed data ends early \(truncated file\?\)"):
        _segment_pages(sources.detect(path), monkeypatch)
    starts = [m.start() for m in multistream._STREAM_START.finditer(data)]
    middle = starts[2]
    path.write_bytes(data[: middle + 40] + b"\x00" * 8 + data[middle + 48 :])
    with pytest.raises(IfqaError, match=r"d\.xml\.bz2: corrupt bz2 data in bytes \d+-\d+"):
        _segment_pages(sources.detect(path), monkeypatch)
    unclosed = tmp_path / "unclosed.xml"
    unclosed.write_text(small_dump.read_text().replace("</mediawiki>", ""))
    with pytest.raises(IfqaError, match="ends before </mediawiki>"):
        _segment_pages(sources.detect(wikipedia_multistream(unclosed, tmp_path / "u.xml.bz2")), monkeypatch)


def test_stream_starts_do_not_depend_on_where_reads_end(tmp_path, small_dump):
    path = bz2_file(small_dump, tmp_path / "d.xml.bz2", streams=7)
    expected = list(multistream.stream_starts(path))
    assert len(expected) == 7 and expected[0] == 0
    for read_size in range(1, 40):  # a signature split at every position between two reads
        assert list(multistream.stream_starts(path, read_size)) == expected


def test_a_file_opening_with_an_empty_stream(tmp_path, small_dump, monkeypatch):
    path = tmp_path / "d.xml.bz2"
    path.write_bytes(bz2.compress(b"") + wikipedia_multistream(small_dump, tmp_path / "w.xml.bz2").read_bytes())
    dump = sources.detect(path)
    assert dump.multistream
    assert _segment_pages(dump, monkeypatch) == list(sources.stream_records(sources.detect(small_dump)))
