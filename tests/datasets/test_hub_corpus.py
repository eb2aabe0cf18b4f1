"""Passage collections from the Hugging Face Hub layout (`--corpus hf:...`), offline: a local folder of
Parquet files with a dataset card, indexed as the same passages in a JSONL file are."""

import gzip
import json

import pytest

from ifqa.datasets.demo import packaged_passages
from tests.datasets.test_hub import hub_folder


def _passages(n=300):
    with gzip.open(packaged_passages(), "rt", encoding="utf-8") as handle:
        return [json.loads(line) for _, line in zip(range(n), handle)]


def _corpus_folder(folder, rows, columns=("id", "title", "text"), fmt="parquet"):
    renamed = [{columns[0]: r["id"], columns[1]: r["title"], columns[2]: r["text"]} for r in rows]
    return hub_folder(folder, {"train": renamed}, fmt)


@pytest.fixture
def env(tmp_path):
    import os

    return {**os.environ, "IFQA_CACHE_DIR": str(tmp_path / "cache"), "HF_HUB_OFFLINE": "1"}


@pytest.mark.parametrize("fmt", ["parquet", "jsonl"])  # read with pyarrow; streamed by datasets
def test_an_hf_corpus_is_indexed_as_its_passages_in_a_file_are(cli, tmp_path, env, fmt):
    rows = _passages()
    jsonl = tmp_path / "passages.jsonl"
    jsonl.write_text("".join(json.dumps(r) + "\n" for r in rows))
    spec = f"hf:{_corpus_folder(tmp_path / 'ds', rows, ('docid', 'title', 'contents'), fmt)}"
    for corpus, out in ((jsonl, "from-file"), (spec, "from-hub")):
        built = cli("index", "bm25", "--corpus", corpus, "-o", tmp_path / out, "--no-progress", env=env)
        assert built.returncode == 0, built.stderr
    questions = tmp_path / "q.json"
    questions.write_text(json.dumps([{"idx": 1, "question": rows[7]["text"][:80], "answers": ["x"]}]))
    runs = []
    for out in ("from-file", "from-hub"):
        run = tmp_path / f"{out}.jsonl"
        assert cli("retrieve", "--index", tmp_path / out, "--questions", questions, "-o", run, env=env).returncode == 0
        runs.append([(c["id"], c["score"]) for c in json.loads(run.read_text())["ctxs"]])
    assert runs[0] == runs[1] and runs[0][0][0] == rows[7]["id"]
    manifest = json.loads((tmp_path / "from-hub" / "manifest.json").read_text())
    cached = manifest["corpus"]["path"]
    hub = json.loads(open(f"{cached}.manifest.json").read())["hub"]
    assert hub["fields"] == {"id": "docid", "title": "title", "text": "contents"} and hub["split"] == "train"
    again = cli("index", "bm25", "--corpus", spec, "-o", tmp_path / "again", "--no-progress", env=env)
    assert (
        again.returncode == 0
        and json.loads((tmp_path / "again" / "manifest.json").read_text())["corpus"] == (manifest["corpus"])
    )  # the passages file is made once per dataset content


@pytest.mark.parametrize(
    "rows, query, expected",
    [
        ([{"id": "p1", "title": "T", "text": ""}], "", "row 0 has no id or no text"),
        ([{"id": "p1", "title": "T", "text": "a river"}], "?fields=text:body", "fields maps text to 'body'"),
        ([{"id": "p1", "title": "T", "text": "a river"}], "?split=dev", "no split 'dev'"),
    ],
)
def test_a_corpus_row_or_mapping_that_does_not_fit_is_one_line_and_writes_nothing(
    cli, tmp_path, env, rows, query, expected
):
    spec = f"hf:{_corpus_folder(tmp_path / 'ds', rows)}{query}"
    result = cli("index", "bm25", "--corpus", spec, "-o", tmp_path / "idx", "--no-progress", env=env)
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 1 and len(lines) == 1 and expected in lines[0], result.stderr
    assert not (tmp_path / "idx").exists() and not list((tmp_path / "cache").rglob("*.jsonl"))


def test_an_hf_corpus_offline_and_not_cached_is_one_line(cli, tmp_path, env):
    result = cli("index", "bm25", "--corpus", "hf:someone/no-such-corpus", "-o", tmp_path / "idx", env=env)
    assert result.returncode == 1 and "point at a local copy" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 and not (tmp_path / "idx").exists()
