import json
import os
import re
import sys

import pytest

pytest.importorskip("pyserini", reason="the optional pyserini backend is not installed")

from ifqa.datasets.demo import (
    corpus_path,  # noqa: E402
    load_demo,  # noqa: E402
)
from ifqa.errors import IfqaError  # noqa: E402
from ifqa.retrieval import bm25, lucene  # noqa: E402
from ifqa.retrieval.specs import open_index  # noqa: E402


@pytest.mark.slow
def test_lucene_index_agrees_with_bm25s(tmp_path, monkeypatch):
    monkeypatch.setenv("IFQA_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    corpus = corpus_path()
    manifest = lucene.build(corpus, tmp_path / "lucene")
    assert manifest["engine"] == "pyserini" and manifest["passages"] == 4151
    assert manifest["lucene"].split(".")[0] == ("9" if sys.version_info < (3, 12) else "10")  # pyserini 1.6 or 2
    assert "OPENAI_API_KEY" not in os.environ  # pyserini's import-time client got a placeholder only
    bm25.build(corpus, tmp_path / "bm25s", progress=False)
    a, b = open_index(tmp_path / "lucene"), open_index(tmp_path / "bm25s")
    questions = [e.question for e in load_demo("dev")]
    overlaps, same_top = [], 0
    for hits_a, hits_b in zip(a.search(questions, 20, threads=2), b.search(questions, 20)):
        same_top += a.passages[hits_a[0][0]]["id"] == b.passages[hits_b[0][0]]["id"]
        overlaps.append(len({p for p, _ in hits_a} & {p for p, _ in hits_b}) / 20)
    # Lucene stores document lengths lossily (one byte), so near-tied scores can swap
    assert same_top >= 0.9 * len(questions)
    assert sum(overlaps) / len(overlaps) > 0.9

    # an index another Lucene major built: one line naming it and both versions
    manifest_path = tmp_path / "lucene" / "manifest.json"
    other = "10.5.0" if manifest["lucene"].startswith("9.") else "9.9.1"
    manifest_path.write_text(json.dumps({**manifest, "lucene": other}))
    with pytest.raises(IfqaError, match=f"built by Lucene {re.escape(other)}; this pyserini runs Lucene "):
        open_index(tmp_path / "lucene")
