"""The question-agnostic control: a passage classifier that never reads the question."""

import json

from ifqa.artifacts import read_run


def test_control_trains_without_pickle_and_ignores_the_question(tmp_path, cli):
    out = tmp_path / "control"
    result = cli("train", "--control", "--index", "demo:bm25", "--setting", "demo", "--no-progress", "-o", out)
    assert result.returncode == 0, result.stderr
    assert "held-out AUC" in result.stdout
    files = sorted(p.name for p in (out / "model").iterdir())
    assert files == ["ifqa_card.json", "passage_prior.json", "passage_prior.npy"]
    run = tmp_path / "run.jsonl"
    assert cli("retrieve", "--k", "10", "-o", run, "--no-progress").returncode == 0
    records = read_run(run)
    from ifqa.retrieval.control import PassagePriorReranker

    control = PassagePriorReranker(out / "model", depth=10)
    texts = [c["text"] for c in records[0]["ctxs"]]
    first = [c["score"] for c in records[0]["ctxs"]]
    assert control.score("one question", texts, first) == control.score("another entirely", texts, first)
    reranked = tmp_path / "reranked.jsonl"
    result = cli("rerank", "--run", run, "--model", out / "model", "--depth", "10", "-o", reranked, "--no-progress")
    assert result.returncode == 0, result.stderr
    assert json.loads((out / "model" / "ifqa_card.json").read_text())["kind"] == "control"
    assert [len(r["ctxs"]) for r in read_run(reranked)] == [len(r["ctxs"]) for r in records]
