import gzip
import json

from ifqa.datasets import demo


def test_the_unpacked_collection_follows_the_packaged_one(tmp_path, monkeypatch):
    monkeypatch.setenv("IFQA_CACHE_DIR", str(tmp_path / "cache"))
    packaged = tmp_path / "passages.jsonl.gz"
    monkeypatch.setattr(demo, "packaged_passages", lambda: packaged)
    first, second = b'{"id": "1-0", "title": "A", "text": "ab"}\n', b'{"id": "1-0", "title": "A", "text": "ba"}\n'
    packaged.write_bytes(gzip.compress(first, mtime=0))
    assert demo.corpus_path().read_bytes() == first
    packaged.write_bytes(gzip.compress(second, mtime=0))  # a newer release: same size, other passages
    assert len(gzip.compress(first, mtime=0)) == len(gzip.compress(second, mtime=0))
    assert demo.corpus_path().read_bytes() == second


def test_demo_questions_point_at_demo_passages():
    passages = {json.loads(line)["text"] for line in demo.corpus_path().read_text().splitlines()}
    for example in demo.load_demo("dev") + demo.load_demo("train"):
        assert example.context[0] in passages, example.qid
