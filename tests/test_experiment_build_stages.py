"""A self-contained experiment: collection, index and trained models built by its own stages,
reused while up to date, with intervals and paired tests in the results."""

import json
import shutil

from ifqa.experiments.runner import run_experiment

CONFIG = """
name: built
questions: {{setting: demo, split: dev}}
output: out
k: 10
stages:
  - {{stage: collection, name: collection, inputs: [passages.jsonl]}}
  - {{stage: index, name: bm25-index, collection: collection, engine: bm25}}
  - {{stage: train, name: classifier, kind: control, index: bm25-index}}
  - {{stage: train, name: reranker, kind: reranker, index: bm25-index, recipe: {{model: {model}, group_size: 4, questions_per_step: 2, max_length: 64}}}}
  - {{stage: train, name: skipped, kind: retriever, index: bm25-index, enabled: "${{IFQA_TEST_DENSE:-no}}"}}
  - {{stage: retrieve, name: bm25, indexes: [bm25-index]}}
  - {{stage: retrieve, name: clean, indexes: [bm25-index], query_mode: clean, compare_to: bm25}}
  - {{stage: retrieve, name: control, indexes: [bm25-index], query_mode: clean, rerank: classifier, compare_to: bm25}}
  - {{stage: retrieve, name: reranked, indexes: [bm25-index], rerank: reranker, rerank_depth: 10, compare_to: bm25}}
"""


def test_experiment_builds_trains_and_reuses(tmp_path, tiny_model):
    from ifqa.datasets.demo import corpus_path

    shutil.copy(corpus_path(), tmp_path / "passages.jsonl")
    config = tmp_path / "exp.yaml"
    config.write_text(CONFIG.format(model=tiny_model))
    results = run_experiment(config, progress=False)
    names = [r["name"] for r in results["retrievers"]]
    assert names == ["bm25", "clean", "control", "reranked"]
    rows = {r["name"]: r for r in results["retrievers"]}
    assert "vs" not in rows["bm25"] and rows["clean"]["vs"]["name"] == "bm25"
    assert set(rows["reranked"]["vs"]) == {"name", "1", "5"} and set(rows["bm25"]["gold_ci95"]) == {"1", "5"}
    out = tmp_path / "out"
    assert (out / "collections" / "collection.jsonl").exists() and (
        out / "indexes" / "bm25-index" / "manifest.json"
    ).exists()
    assert not (out / "models" / "skipped").exists()
    card = json.loads((out / "models" / "reranker" / "model" / "ifqa_card.json").read_text())
    assert card["training_data"]["questions"]["name"] == "demo:train"
    assert card["dev"]["reranked"]["gold_recall"] == rows["reranked"]["recall"]["gold"]  # dev scores in the card
    assert "paired permutation test" in (out / "results.md").read_text()
    stamp = (out / "models" / "reranker" / "model" / "model.safetensors").stat().st_mtime_ns
    again = run_experiment(config, progress=False)
    assert (out / "models" / "reranker" / "model" / "model.safetensors").stat().st_mtime_ns == stamp  # reused
    assert [r["recall"] for r in again["retrievers"]] == [r["recall"] for r in results["retrievers"]]
