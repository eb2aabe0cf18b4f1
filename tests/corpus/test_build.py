import json
import signal
import subprocess
import sys
import time

import pytest

from ifqa.corpus.build import build, manifest_path
from ifqa.errors import IfqaError
from tests.corpus.conftest import bz2_file, dump, page, prose, wikipedia_multistream


def _lines(path):
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_xml_dump_to_passages(tmp_path, small_dump):
    out = tmp_path / "passages.jsonl"
    summary = build([small_dump], out, words=100, progress=False)
    passages = _lines(out)
    assert [p["id"] for p in passages] == ["10-0", "14-0", "14-1", "14-2"]
    assert passages[0] == {
        "id": "10-0",
        "title": "Glimmerton",
        "text": "Glimmerton is a town on the Lune. It has 1,200 people. History. Founded in 1190 by monks & traders.",
    }
    assert [len(p["text"].split()) for p in passages[1:]] == [100, 100, 50]
    assert summary.records == 6 and summary.kept == 2 and summary.passages == 4
    assert summary.skipped == {"redirect": 1, "disambiguation": 1, "not an article (namespace)": 1, "empty": 1}
    assert summary.words == 19 + 250
    manifest = json.loads(manifest_path(out).read_text())
    assert manifest["summary"]["passages"] == 4 and manifest["words"] == 100 and len(manifest["sha256"]) == 64
    assert set(manifest["cpu_seconds"]) == {"reading_process", "workers", "joining"}
    assert all(seconds >= 0 for seconds in manifest["cpu_seconds"].values())
    assert not list(tmp_path.glob(".*parts"))


def test_bz2_multistream_workers_and_tsv_agree(tmp_path, small_dump, monkeypatch):
    plain = tmp_path / "a.jsonl"
    build([small_dump], plain, progress=False)
    multi = bz2_file(small_dump, tmp_path / "dump-multistream.xml.bz2", streams=3)
    monkeypatch.setattr("ifqa.corpus.multistream.SEGMENT_BYTES", 1)  # a segment per stream, spread over the workers
    parallel = tmp_path / "b.jsonl"
    build([multi], parallel, workers=2, batch_size=1, progress=False)
    assert parallel.read_bytes() == plain.read_bytes()
    tsv = tmp_path / "c.tsv"
    build([small_dump], tsv, progress=False)
    rows = tsv.read_text().splitlines()
    assert rows[0] == "id\ttext\ttitle"
    assert [row.split("\t") for row in rows[1:]] == [[p["id"], p["text"], p["title"]] for p in _lines(plain)]


def test_words_option_and_wikiextractor_inputs(tmp_path):
    (tmp_path / "wiki.json").write_text(
        json.dumps({"id": "7", "url": "u", "title": "Seven", "text": "one two three\nfour five"})
        + "\n"
        + '{"broken json\n'
    )
    (tmp_path / "wiki_00").write_text(
        '<doc id="8" url="u" title="Eight &amp; more">\nEight &amp; more\n\nsix seven eight\n</doc>\n'
    )
    out = tmp_path / "p.jsonl"
    summary = build([tmp_path / "wiki.json", tmp_path / "wiki_00"], out, words=2, progress=False)
    assert [(p["id"], p["title"], p["text"]) for p in _lines(out)] == [
        ("7-0", "Seven", "one two"),
        ("7-1", "Seven", "three four"),
        ("7-2", "Seven", "five"),
        ("8-0", "Eight & more", "six seven"),
        ("8-1", "Eight & more", "eight"),
    ]
    assert summary.skipped == {"malformed record": 1}


def test_passages_pass_through_unchanged(tmp_path, small_dump):
    given = [{"id": "ifqa-1", "title": "", "text": "a gold passage with    odd  spacing"}]
    (tmp_path / "gold.jsonl").write_text("".join(json.dumps(p) + "\n" for p in given))
    (tmp_path / "dpr.tsv").write_text("id\ttext\ttitle\n1\tsome text\tSome title\n")
    out = tmp_path / "all.jsonl"
    build([small_dump, tmp_path / "gold.jsonl", tmp_path / "dpr.tsv"], out, progress=False)
    passages = _lines(out)
    assert passages[-2] == given[0]
    assert passages[-1] == {"id": "1", "title": "Some title", "text": "some text"}


def test_bad_article_is_skipped_and_counted(tmp_path):
    good = page(1, "Good", "Fine text here.")
    broken_xml = page(2, "Broken", "a < b & c", raw=True)
    text = dump([good, broken_xml, page(3, "Bytes", "PLACEHOLDER")])
    data = text.encode().replace(b"PLACEHOLDER", b"caf\xe9 au lait")
    (tmp_path / "d.xml").write_bytes(data)
    summary = build([tmp_path / "d.xml"], tmp_path / "p.jsonl", progress=False)
    assert summary.kept == 1
    assert summary.skipped == {"malformed page": 1, "bad encoding": 1}


def test_bad_input_leaves_nothing(tmp_path, small_dump):
    text = small_dump.read_text()
    (tmp_path / "cut.xml").write_text(text[: len(text) // 2])
    out = tmp_path / "p.jsonl"
    with pytest.raises(IfqaError, match="truncated"):
        build([small_dump, tmp_path / "cut.xml"], out, progress=False)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cut.xml", "dump.xml"]


def test_duplicate_ids_across_inputs_are_an_error(tmp_path, small_dump):
    copy = tmp_path / "copy.xml"
    copy.write_bytes(small_dump.read_bytes())
    with pytest.raises(IfqaError, match="passage id '10-0' occurs more than once"):
        build([small_dump, copy], tmp_path / "p.jsonl", progress=False)
    assert not (tmp_path / "p.jsonl").exists()


def test_cli_build_prints_summary_and_errors_in_one_line(cli, tmp_path, small_dump):
    result = cli("corpus", "build", small_dump, "-o", tmp_path / "p.jsonl", "--no-progress")
    assert result.returncode == 0, result.stderr
    assert "passages written" in result.stdout and "skipped: redirect" in result.stdout
    (tmp_path / "x.xml.bz2").write_text("not bz2")
    result = cli("corpus", "build", tmp_path / "x.xml.bz2", "-o", tmp_path / "q.jsonl")
    assert result.returncode == 1
    assert result.stderr.strip() == f"ifqa: error: {tmp_path / 'x.xml.bz2'}: named .bz2 but is not bz2-compressed"
    assert not (tmp_path / "q.jsonl").exists()


def test_interrupted_build_resumes_to_the_same_output(tmp_path):
    pages = [
        page(100 + i, f"Article {i}", prose(120 + i % 50, seed=i) + "\n== Part ==\n" + prose(80, seed=i + 1))
        for i in range(600)
    ]
    source = tmp_path / "big.xml"
    source.write_text(dump(pages))
    reference = tmp_path / "reference.jsonl"
    build([source], reference, batch_size=5, progress=False)

    out = tmp_path / "out" / "p.jsonl"
    command = [
        sys.executable,
        "-m",
        "ifqa.cli",
        "corpus",
        "build",
        str(source),
        "-o",
        str(out),
        "--batch-size",
        "5",
        "--no-progress",
    ]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    parts = out.parent / ".p.jsonl.parts"
    deadline = time.time() + 60
    while time.time() < deadline and len(list(parts.glob("*.part"))) < 5:
        time.sleep(0.01)
    process.send_signal(signal.SIGTERM)
    _, stderr = process.communicate(timeout=60)
    assert process.returncode == 143, stderr
    assert "rerun the same command to resume" in stderr
    assert not out.exists()
    finished_before = len(list(parts.glob("*.part")))
    assert 5 <= finished_before < 120

    result = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert out.read_bytes() == reference.read_bytes()
    assert not parts.exists()


def test_interrupted_multistream_build_resumes_to_the_same_output(tmp_path, monkeypatch):
    from ifqa.corpus import build as build_module
    from ifqa.corpus import multistream

    pages = [page(100 + i, f"Article {i}", prose(150, seed=i)) for i in range(40)]
    (tmp_path / "d.xml").write_text(dump(pages))
    multi = wikipedia_multistream(tmp_path / "d.xml", tmp_path / "d-multistream.xml.bz2", pages_per_stream=3)
    monkeypatch.setattr(multistream, "SEGMENT_BYTES", 1)  # about a segment per stream
    batches = len(list(multistream.segments(multi)))
    assert batches > 10
    reference = tmp_path / "reference.jsonl"
    build([multi], reference, progress=False)
    real, calls, interrupt_at = build_module.process_batch, [], [6]

    def counted(*args):
        calls.append(1)
        if len(calls) in interrupt_at:
            raise KeyboardInterrupt  # Ctrl-C while the sixth batch is being processed
        return real(*args)

    monkeypatch.setattr(build_module, "process_batch", counted)
    out = tmp_path / "out.jsonl"
    with pytest.raises(KeyboardInterrupt):
        build([multi], out, progress=False)
    assert len(list(tmp_path.glob(".out.jsonl.parts/*.part"))) == 5 and not out.exists()
    calls.clear()
    interrupt_at.clear()
    build([multi], out, progress=False)
    assert len(calls) == batches - 5  # only the batches not done before
    assert out.read_bytes() == reference.read_bytes()


@pytest.mark.shared_data
def test_the_demo_collection_is_what_the_builder_makes_of_the_dump_fragment(shared, tmp_path):
    import gzip

    from ifqa.datasets.demo import packaged_passages

    out = tmp_path / "p.jsonl"
    fragment = shared / "wikidump" / "enwiki-latest-pages-articles1.xml-p000000010p000030302-shortened.bz2"
    summary = build([fragment], out, workers=2, progress=False)
    assert summary.records == 206 and summary.kept == 97
    assert summary.skipped == {"redirect": 99, "disambiguation": 8, "not an article (namespace)": 1, "empty": 1}
    shipped = gzip.decompress(packaged_passages().read_bytes())
    assert shipped == out.read_bytes(), "the cleaner changed: rebuild ifqa/demo (see ifqa/demo/README.md)"


@pytest.mark.shared_data
def test_table_heavy_pages_leave_no_markup(shared, tmp_path):
    out = tmp_path / "t.jsonl"
    build([shared / "wikidump" / "enwiki-table-markup.xml.bz2"], out, progress=False)
    text = out.read_text()
    for debris in ("{|", "|}", "||", "{{", "}}", "<ref", "[[", "]]", "colspan", "rowspan", "style="):
        assert debris not in text, debris


@pytest.mark.parametrize("limit, refused", [(14, True), (64, False)])
def test_too_few_file_handles_for_the_workers_is_one_line_not_a_hang(small_dump, tmp_path, limit, refused):
    """A pool whose pipes do not fit ``ulimit -n`` once printed a line and then hung until killed."""
    import resource

    out = tmp_path / "out.jsonl"
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "ifqa.cli",
            "corpus",
            "build",
            str(small_dump),
            "-o",
            str(out),
            "--workers",
            "2",
            "--no-progress",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (limit, limit)),
    )
    if refused:
        lines = result.stderr.strip().splitlines()
        assert result.returncode == 1 and len(lines) == 1 and "ulimit -n" in lines[0], result.stderr
        assert sorted(p.name for p in tmp_path.iterdir()) == [small_dump.name]  # no parts folder, no lock
    else:
        assert result.returncode == 0, result.stderr


def _tabbed_inputs(folder):
    """A title holding a tab, in every input format the builder reads."""
    folder.mkdir()
    title, text = "River\tBridge", prose(120)
    (folder / "dump.xml").write_text(dump([page(3, title, text)]))
    record = {"id": "3", "title": title, "text": text, "url": "u"}
    (folder / "extracted.json").write_text(json.dumps(record) + "\n")
    (folder / "extracted.doc").write_text(f'<doc id="3" url="u" title="{title}">\n{title}\n\n{text}\n</doc>\n')
    (folder / "passages.jsonl").write_text(json.dumps({"id": "3-0", "title": title, "text": text}) + "\n")
    return {
        "xml": folder / "dump.xml",
        "wikiextractor-json": folder / "extracted.json",
        "wikiextractor-doc": folder / "extracted.doc",
        "passages-jsonl": folder / "passages.jsonl",
    }


@pytest.mark.parametrize("fmt", ["xml", "wikiextractor-json", "wikiextractor-doc", "passages-jsonl"])
def test_a_tab_in_a_title_never_becomes_a_tsv_column(tmp_path, fmt):
    source = _tabbed_inputs(tmp_path / "in")[fmt]
    out = tmp_path / "out.tsv"
    build([str(source)], out, format=fmt, progress=False)
    rows = out.read_text(encoding="utf-8").splitlines()
    assert rows[0] == "id\ttext\ttitle" and len(rows) > 1
    assert all(len(row.split("\t")) == 3 and row.endswith("River Bridge") for row in rows[1:]), rows[1:]
