import math
import re

import pytest
import Stemmer

from ifqa.errors import IfqaError
from ifqa.retrieval import bm25
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
    for query in ["river town stone bridge", "Copper's conductivity", "bird of prey speed harbour", "the town's harbour"]:
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
    bm25.build(corpus, tmp_path / "idx", progress=False)
    with pytest.raises(IfqaError, match="already exists"):
        bm25.build(corpus, tmp_path / "idx", progress=False)
    bad = tmp_path / "bad.jsonl"
    bad.write_text(corpus.read_text() + '{"id": "x", "title": "t"}\n')
    with pytest.raises(IfqaError, match=r"bad\.jsonl:9: not a passage record"):
        bm25.build(bad, tmp_path / "idx2", progress=False)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.jsonl", "idx", "passages.jsonl"]


def test_tokens_follow_lucene_standard_tokenizer_in_common_cases():
    tokenizer = bm25.analyzer(bm25.DEFAULT_PARAMS)
    words = tokenizer.tokenize(["The U.S. paid 1,000.50 dollars; don't in John's car-park"], update_vocab=True,
                               return_as="string", show_progress=False)[0]
    # "U.S." is one token, which Porter then stems to "u." exactly as Lucene's PorterStemFilter would
    assert words == ["u.", "paid", "1,000.50", "dollar", "don't", "john", "car", "park"]
