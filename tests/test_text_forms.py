"""Text in every form (trust round 6): canonically equivalent text is the same text wherever it enters
(questions, queries, passages, the question-set check: io.nfc, once), a byte-order mark is no part of
a file's first record, and a record that is not Unicode text is one line naming its line."""

import json
import os
import unicodedata

import pytest

from ifqa.datasets.demo import load_demo

DEV = load_demo("dev")
#: demo questions written with accented letters, and a passage text with them
ACCENTED = "If the café in Zürich closed, where would Renée meet Søren?"


def _nfd(text: str) -> str:
    return unicodedata.normalize("NFD", text)


def _questions_file(path, transform) -> None:
    records = [
        {"idx": e.qid, "question": transform(e.question), "answers": e.answers, "context": e.context} for e in DEV
    ]
    records.append({"idx": "x1", "question": transform(ACCENTED), "answers": ["the station"], "context": []})
    path.write_text(json.dumps(records, ensure_ascii=False))


def test_a_question_set_in_nfd_is_the_same_set_and_retrieves_the_same(cli, tmp_path):
    runs = {}
    for form, transform in (("nfc", str), ("nfd", _nfd)):
        questions = tmp_path / f"{form}.json"
        _questions_file(questions, transform)
        runs[form] = tmp_path / f"{form}-run.jsonl"
        result = cli("retrieve", "--questions", questions, "--k", "5", "-o", runs[form], "--no-progress")
        assert result.returncode == 0, result.stderr
    nfc_records = runs["nfc"].read_text()
    assert runs["nfd"].read_text() == nfc_records  # the same questions, passages and scores
    manifests = [
        json.loads((tmp_path / f"{f}-run.jsonl.manifest.json").read_text())["questions"] for f in ("nfc", "nfd")
    ]
    assert manifests[0]["id"] == manifests[1]["id"]
    # a manifest-less run that holds the NFD forms is the NFC set's run
    bare = tmp_path / "bare.jsonl"
    bare.write_text(
        "".join(
            json.dumps({**json.loads(line), "question": _nfd(json.loads(line)["question"])}) + "\n"
            for line in nfc_records.splitlines()
        )
    )
    result = cli("evaluate", "--run", bare, "--questions", tmp_path / "nfc.json", "--json")
    assert result.returncode == 0, result.stderr


def test_an_nfd_query_and_passage_are_the_nfc_ones(tmp_path):
    from ifqa import open_index
    from ifqa.retrieval import bm25

    texts = {"p1": "Renée met Søren at the café in Zürich.", "p2": "The station is north of the river."}
    for form, transform in (("nfc", str), ("nfd", _nfd)):
        corpus = tmp_path / f"{form}.jsonl"
        corpus.write_text(
            "".join(json.dumps({"id": k, "title": "", "text": transform(v)}) + "\n" for k, v in texts.items())
        )
        bm25.build(corpus, tmp_path / f"idx-{form}", progress=False)
    hits = {
        (index, query): [
            (h.id, round(h.score, 5), h.text) for h in open_index(tmp_path / f"idx-{index}").search(q, k=2)
        ]
        for index in ("nfc", "nfd")
        for query, q in (("nfc", "café Zürich"), ("nfd", _nfd("café Zürich")))
    }
    assert len(set(map(tuple, hits.values()))) == 1 and hits["nfc", "nfc"][0][0] == "p1"


@pytest.mark.parametrize("suffix", [".tsv", ".jsonl"])
def test_a_byte_order_mark_is_no_part_of_the_first_passage(cli, tmp_path, suffix):
    if suffix == ".tsv":
        body = "id\ttext\ttitle\n1\tthe river runs north\tRiver\n2\ta bridge crosses it\tBridge\n"
    else:
        body = "".join(
            json.dumps({"id": str(i), "title": t, "text": x}) + "\n"
            for i, t, x in ((1, "River", "the river runs north"), (2, "Bridge", "a bridge crosses it"))
        )
    corpus = tmp_path / f"bom{suffix}"
    corpus.write_bytes(b"\xef\xbb\xbf" + body.encode())
    result = cli("index", "bm25", "--corpus", corpus, "-o", tmp_path / "idx", "--no-progress")
    assert result.returncode == 0, result.stderr
    assert json.loads((tmp_path / "idx" / "manifest.json").read_text())["passages"] == 2
    from ifqa import open_index

    [hit] = open_index(tmp_path / "idx").search("river north", k=1)
    assert hit.id == "1" and hit.title == "River"
    out = tmp_path / "built.jsonl"
    assert cli("corpus", "build", corpus, "-o", out, "--no-progress").returncode == 0
    assert [json.loads(line)["id"] for line in out.read_text().splitlines()] == ["1", "2"]


def test_corpus_build_refuses_a_passage_that_is_not_unicode_in_one_line(cli, tmp_path):
    corpus = tmp_path / "p.jsonl"
    corpus.write_text('{"id": "1", "title": "T", "text": "fine"}\n{"id": "2", "title": "T", "text": "bad \\ud800"}\n')
    result = cli("corpus", "build", corpus, "-o", tmp_path / "out.jsonl", "--no-progress")
    lines = result.stderr.strip().splitlines()
    assert (
        result.returncode == 1
        and "p.jsonl:2" in lines[-1]
        and "surrogate" in lines[-1]
        and "Traceback" not in result.stderr
    )
    assert not (tmp_path / "out.jsonl").exists()


def test_a_title_holding_a_tab_stays_one_dpr_field(cli, tmp_path):
    corpus = tmp_path / "p.jsonl"
    corpus.write_text(json.dumps({"id": "1", "title": "A\tB", "text": "some text"}) + "\n")
    assert cli("corpus", "build", corpus, "-o", tmp_path / "out.tsv", "--no-progress").returncode == 0
    assert (tmp_path / "out.tsv").read_text().splitlines()[1].split("\t") == ["1", "some text", "A B"]


def test_a_question_typed_under_an_ascii_locale_is_read_as_the_utf8_the_terminal_sent(tmp_path):
    """``LC_ALL=POSIX PYTHONUTF8=0``: Python hands non-ASCII argument bytes over as lone surrogates;
    ``--query`` decodes them as UTF-8 (what terminals send), and bytes that are not UTF-8 are one line."""
    import subprocess
    import sys

    env = {**os.environ, "LC_ALL": "POSIX", "PYTHONUTF8": "0", "IFQA_CACHE_DIR": str(tmp_path / "cache")}
    env.pop("PYTHONIOENCODING", None)
    command = [sys.executable, "-m", "ifqa.cli", "retrieve", "--k", "3", "--query"]
    typed = subprocess.run(
        [*command, "Si la Méditerranée était fermée, où irait le Rhône?".encode()], capture_output=True, env=env
    )
    utf8 = subprocess.run(
        [*command, "Si la Méditerranée était fermée, où irait le Rhône?"],
        capture_output=True,
        env={**env, "LC_ALL": "C.UTF-8", "PYTHONUTF8": "1"},
    )
    assert typed.returncode == 0, typed.stderr.decode(errors="replace")
    assert (
        typed.stdout.decode("ascii", errors="backslashreplace").split()
        == utf8.stdout.decode().encode("ascii", errors="backslashreplace").decode().split()
    )
    broken = subprocess.run([*command, b"\xff\xfe?"], capture_output=True, env=env)
    lines = broken.stderr.decode(errors="replace").strip().splitlines()
    assert broken.returncode != 0 and len(lines) == 1 and "not UTF-8 text" in lines[0], lines
