import bz2

import pytest

from ifqa.corpus import sources
from ifqa.errors import IfqaError
from tests.corpus.conftest import bz2_file


def test_detects_formats_from_content(tmp_path, small_dump):
    assert sources.detect(small_dump).format == "xml"
    compressed = bz2_file(small_dump, tmp_path / "dump.xml.bz2")
    assert (sources.detect(compressed).format, sources.detect(compressed).compression) == ("xml", "bz2")
    (tmp_path / "wiki_00").write_text('<doc id="1" url="u" title="T">\nT\n\nBody.\n</doc>\n')
    assert sources.detect(tmp_path / "wiki_00").format == "wikiextractor-doc"
    (tmp_path / "a.json").write_text('{"id": "1", "url": "u", "title": "T", "text": "Body."}\n')
    assert sources.detect(tmp_path / "a.json").format == "wikiextractor-json"
    (tmp_path / "p.jsonl").write_text('{"id": "p1", "title": "", "text": "Body."}\n')
    assert sources.detect(tmp_path / "p.jsonl").format == "passages-jsonl"
    (tmp_path / "p.tsv").write_text("id\ttext\ttitle\n1\tBody.\tT\n")
    assert sources.detect(tmp_path / "p.tsv").format == "passages-tsv"


def test_detects_json_whose_first_article_is_longer_than_the_sniffed_head(tmp_path):
    import gzip
    import json

    long_article = {"id": "12", "url": "u", "title": "Anarchism", "text": "word " * 200_000}  # ~1 MB line
    path = tmp_path / "articles.jsonl.gz"
    with gzip.open(path, "wt") as handle:
        handle.write(json.dumps(long_article) + "\n")
    assert sources.detect(path).format == "wikiextractor-json"


def test_a_file_that_is_not_what_its_name_says(tmp_path, small_dump):
    fake = tmp_path / "dump.xml.bz2"
    fake.write_bytes(small_dump.read_bytes())
    with pytest.raises(IfqaError, match="named .bz2 but is not bz2-compressed"):
        sources.detect(fake)
    (tmp_path / "notes.txt").write_text("hello")
    with pytest.raises(IfqaError, match="not a recognized input"):
        sources.detect(tmp_path / "notes.txt")


def test_truncated_compressed_file(tmp_path, small_dump):
    data = bz2.compress(small_dump.read_bytes())
    cut = tmp_path / "cut.xml.bz2"
    cut.write_bytes(data[: len(data) - 40])
    with pytest.raises(IfqaError, match=r"cut\.xml\.bz2: compressed data ends early \(truncated file\?\)"):
        list(sources.stream_records(sources.detect(cut)))


def test_xml_without_its_end(tmp_path, small_dump):
    text = small_dump.read_text()
    cut = tmp_path / "cut.xml"
    cut.write_text(text[: text.rindex("</page>")])
    with pytest.raises(IfqaError, match="truncated"):
        list(sources.stream_records(sources.detect(cut)))
    cut.write_text(text.replace("</mediawiki>", ""))
    with pytest.raises(IfqaError, match=r"ends before </mediawiki>"):
        list(sources.stream_records(sources.detect(cut)))
