"""Query formulations: cue-word cleaning, premise + main clause fused, and the LLM rewrites."""

import json

import pytest

from ifqa.api import Pipeline
from ifqa.retrieval import queries
from ifqa.retrieval.bm25 import build
from ifqa.retrieval.config import RetrievalConfig
from tests.readers.fake_openai import FakeOpenAI

QUESTION = "If the river Lune had dried up, what would Glimmerton's bridge cross instead?"


def test_clean_drops_counterfactual_cue_words_and_keeps_the_facts():
    assert queries.clean_cues(QUESTION) == "the river Lune dried up Glimmerton's bridge cross"
    assert queries.clean_cues("Wouldn't it be so if it hadn't?") == "it so it"
    assert queries.clean_cues("If what would?") == "If what would?"  # nothing left: the question as is


def test_split_searches_the_question_premise_and_main_clause():
    assert queries.premise_and_main(QUESTION) == [
        "the river Lune dried up Glimmerton's bridge cross",
        "the river Lune dried up",
        "Glimmerton's bridge cross",
    ]
    assert queries.premise_and_main("Who built the bridge?") == ["built the bridge"]


@pytest.fixture
def index(tmp_path, corpus):
    build(corpus, tmp_path / "bm25", progress=False)
    return tmp_path / "bm25"


@pytest.mark.parametrize("mode", ["question", "clean", "split", "premise", "main-clause"])
def test_every_rule_mode_retrieves_through_the_pipeline(index, mode):
    hits = Pipeline(indexes=[str(index)], k=3, query_mode=mode).search(QUESTION)
    assert 1 <= len(hits) <= 3  # BM25 returns only passages sharing a term
    if mode in ("clean", "split", "question"):
        assert hits[0].id == "p0"


class RewritingServer(FakeOpenAI):
    def reply(self, prompt, body):
        if prompt.rstrip().endswith("Queries:"):
            return "1. copper conductivity\n2. soft metal\n"
        if prompt.rstrip().endswith("Paragraph:"):
            return "Copper is a soft metal with high thermal and electrical conductivity."
        return "?"


@pytest.mark.parametrize("mode", ["rewrite", "hyde"])
def test_llm_formulations_go_through_the_endpoint_and_its_cache(index, tmp_path, monkeypatch, mode):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    question = "If it lost what it is prized for, what would wiring use?"  # names no entity of the collection
    config = RetrievalConfig(
        indexes=[str(index)], k=2, query_mode=mode, rewrite_model="m", rewrite_cache=str(tmp_path / "cache.sqlite")
    )
    with RewritingServer({}) as server:
        config.rewrite_base_url = server.url
        hits = Pipeline(config).search(question)
        assert len(server.requests) == 1
        assert Pipeline(config).search(question) == hits  # a rerun is served from the cache
        assert len(server.requests) == 1
    assert hits[0].id == "p2"
    if mode == "rewrite":
        prompt = json.dumps(server.requests[0])
        assert "search queries" in prompt and question[:20] in prompt


def test_llm_mode_without_a_model_is_one_clear_error(index):
    from ifqa.errors import IfqaError

    with pytest.raises(IfqaError, match="needs a model: --rewrite-model"):
        Pipeline(indexes=[str(index)], query_mode="rewrite")
    with pytest.raises(IfqaError, match="needs a model: --rewrite-model"):  # said before any index is opened
        Pipeline(indexes=[str(index / "no-such-index")], query_mode="hyde")
