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


def test_a_train_stage_trains_on_the_experiments_training_file(tmp_path, monkeypatch):
    """`train: {file: ...}` names the training questions of train stages as of readers (it was refused
    with a command-line message), and a whole-value variable takes its YAML type (`${N:-100}` is a number)."""
    from ifqa.datasets.demo import corpus_path, load_demo

    shutil.copy(corpus_path(), tmp_path / "passages.jsonl")
    (tmp_path / "train.json").write_text(json.dumps([e.to_json() for e in load_demo("train")[:8]]))
    (tmp_path / "exp.yaml").write_text(
        "name: t\nquestions: {setting: demo, split: dev}\ntrain: {file: train.json}\noutput: out\nk: ${IFQA_TEST_K:-10}\n"
        "stages:\n  - {stage: collection, name: c, inputs: [passages.jsonl]}\n"
        "  - {stage: index, name: i, collection: c, engine: bm25}\n"
        '  - {stage: train, name: control, kind: control, index: i, recipe: {hard_depth: "${IFQA_TEST_DEPTH:-20}"}}\n'
    )
    monkeypatch.setenv("IFQA_TEST_DEPTH", "15")
    run_experiment(tmp_path / "exp.yaml", progress=False)
    card = json.loads((tmp_path / "out" / "models" / "control" / "model" / "ifqa_card.json").read_text())
    assert card["training_data"]["questions"]["n"] == 8 and card["recipe"]["hard_depth"] == 15


def test_an_experiment_read_from_a_pipe_runs(tmp_path, cli):
    """`ifqa experiment run <(cat e.yaml)`: a pipe is a source (read under the size limit); its paths are
    the shell's, as its working folder."""
    import os
    import threading

    fifo = tmp_path / "e.fifo"
    os.mkfifo(fifo)
    text = "name: p\nquestions: {setting: demo, split: dev}\noutput: out\nk: 3\nretrievers:\n  - {name: b, indexes: [demo:bm25]}\n"
    writer = threading.Thread(target=lambda: fifo.write_text(text), daemon=True)
    writer.start()
    result = cli("experiment", "run", fifo, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "out" / "results.md").exists()
