"""Every Hub read goes through one gate (``hub.reading``) that names the user's spec: question sets and
passage collections (``--questions hf:...``, ``--corpus hf:...``), each with every way a Hub folder can
be wrong, is one line naming the ``hf:`` spec (and the row, where there is one), exit 1, nothing
written; and a collection folder rewritten between two builds is read again (caches keyed by content)."""

from __future__ import annotations

import json
import os

import pytest

pytest.importorskip("datasets")

from tests.datasets.test_hub import hub_folder  # noqa: E402

QUESTIONS = [
    {"idx": "1", "question": "If the river dried up, what would the bridge cross?", "answers": ["a valley"]},
    {"idx": "2", "question": "If the sun rose in the west, where would it set?", "answers": ["the east"]},
]
PASSAGES = [
    {"id": "p1", "title": "River", "text": "The river runs under the bridge."},
    {"id": "p2", "title": "Sun", "text": "The sun sets in the west."},
]


def _no_rows(folder, rows):
    """A split whose file holds no rows."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    hub_folder(folder, {"dev": rows[:1], "train": rows[:1]})
    columns = {
        key: pa.array([], pa.list_(pa.string()) if isinstance(value, list) else pa.string())
        for key, value in rows[0].items()
    }
    for split in ("dev", "train"):
        pq.write_table(pa.table(columns), str(folder / "data" / f"{split}-00000-of-00001.parquet"))


def _damaged(folder, rows):
    hub_folder(folder, {"dev": rows, "train": rows})
    for path in (folder / "data").iterdir():
        path.write_bytes(b"PAR1 this is not a parquet file PAR1")


def _no_files(folder, rows):
    hub_folder(folder, {"dev": rows, "train": rows})
    card = folder / "README.md"
    card.write_text(
        card.read_text()
        .replace("path: data/dev-*", "path: data/missing-*")
        .replace("path: data/train-*", "path: data/missing-*")
    )


def _repeated_id(folder, rows):
    key = "idx" if "idx" in rows[0] else "id"
    twice = [rows[0], {**rows[1], key: rows[0][key]}]
    hub_folder(folder, {"dev": twice, "train": twice})


#: What a Hub folder can be wrong with, and what the line must say.
WRONG = {
    "a split of no rows": (_no_rows, "no rows"),
    "a damaged Parquet file": (_damaged, "not readable Parquet"),
    "a card naming missing files": (_no_files, "split's files are missing (the card names"),
    "one id on two rows": (_repeated_id, "rows 0 and 1 have the same"),
}


@pytest.fixture
def env(tmp_path):
    return {**os.environ, "IFQA_CACHE_DIR": str(tmp_path / "cache"), "HF_HUB_OFFLINE": "1"}


@pytest.mark.parametrize("read", ["questions", "corpus"])
@pytest.mark.parametrize("case", WRONG)
def test_every_hub_read_is_one_line_naming_the_spec(cli, env, tmp_path, read, case):
    make, expected = WRONG[case]
    folder = tmp_path / "hub"
    make(folder, QUESTIONS if read == "questions" else PASSAGES)
    spec = f"hf:{folder}"
    out = tmp_path / "out"
    if read == "questions":
        result = cli("read", "majority", "--questions", spec, "--train", spec, "-o", out, env=env)
    else:
        result = cli("index", "bm25", "--corpus", spec, "-o", out, "--no-progress", env=env)
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr[-2000:]
    assert len(lines) == 1 and lines[0].startswith(f"ifqa: error: {spec}: ") and expected in lines[0], lines
    assert not out.exists()
    corpora = tmp_path / "cache" / "corpora"
    assert not corpora.exists() or not [p for p in corpora.iterdir() if p.suffix == ".jsonl"]


@pytest.mark.parametrize("fmt", ["json", "parquet"])
def test_a_collection_folder_rewritten_between_builds_is_read_again(cli, env, tmp_path, fmt):
    folder = hub_folder(tmp_path / "hub", {"train": PASSAGES}, fmt)
    first = cli("index", "bm25", "--corpus", f"hf:{folder}", "-o", tmp_path / "a", "--no-progress", env=env)
    assert first.returncode == 0, first.stderr
    data = next((folder / "data").iterdir())
    changed = [{**p, "text": p["text"] + " Rewritten."} for p in PASSAGES]
    if fmt == "json":
        data.write_text("".join(json.dumps(p) + "\n" for p in changed))
    else:
        from datasets import Dataset

        Dataset.from_list(changed).to_parquet(str(data))
    second = cli("index", "bm25", "--corpus", f"hf:{folder}", "-o", tmp_path / "b", "--no-progress", env=env)
    assert second.returncode == 0, second.stderr
    corpus = json.loads((tmp_path / "b" / "manifest.json").read_text())["corpus"]["path"]
    assert "Rewritten." in open(corpus, encoding="utf-8").read()
