import json
import os

import pytest

from ifqa.choices import subcommands
from ifqa.retrieval import bm25, dense


@pytest.fixture
def env(cache_with_demo_index):
    return {**os.environ, "IFQA_CACHE_DIR": str(cache_with_demo_index), "HF_HUB_OFFLINE": "1"}


def test_retrieve_on_the_demo_by_default(cli, tmp_path, env):
    result = cli("retrieve", "--k", "20", "--no-progress", cwd=tmp_path, env=env)
    assert result.returncode == 0, result.stderr
    assert "gold" in result.stdout and "@20" in result.stdout
    run = tmp_path / "runs" / "demo-dev-k20.jsonl"
    records = [json.loads(line) for line in run.read_text().splitlines()]
    assert len(records) == 24 and all(len(r["ctxs"]) == 20 for r in records)
    assert set(records[0]) == {"qid", "question", "answers", "ctxs"}
    assert set(records[0]["ctxs"][0]) == {"id", "title", "text", "score", "has_answer", "gold"}
    scores = [c["score"] for c in records[0]["ctxs"]]
    assert scores == sorted(scores, reverse=True)
    manifest = json.loads((tmp_path / "runs" / "demo-dev-k20.jsonl.manifest.json").read_text())
    assert manifest["k"] == 20 and manifest["indexes"][0]["engine"] == "bm25s"
    # the recall the command printed is what the scorer computes from the file
    rescored = cli("evaluate", "--run", run, "--setting", "demo", "--json", env=env)
    printed = cli("retrieve", "--k", "20", "--json", "--no-progress", "-o", tmp_path / "again.jsonl", env=env)
    assert json.loads(printed.stdout)["recall"] == json.loads(rescored.stdout)["recall"]
    assert json.loads(rescored.stdout)["recall"]["gold"]["20"] > 50


def test_ad_hoc_query(cli, env):
    result = cli("retrieve", "--query", "If Achilles had spared Hector, who would have survived?", "--k", "3", env=env)
    assert result.returncode == 0, result.stderr
    assert result.stdout.count("Achilles") >= 3


def test_hybrid_and_conversions(cli, corpus, questions, tmp_path, env):
    bm25.build(corpus, tmp_path / "bm25", progress=False)
    dense.build(corpus, tmp_path / "dense", progress=False)
    run = tmp_path / "hybrid.jsonl"
    result = cli(
        "retrieve",
        "--index",
        tmp_path / "bm25",
        "--index",
        tmp_path / "dense",
        "--k",
        "3",
        "--questions",
        questions,
        "-o",
        run,
        "--no-progress",
        "--json",
        env=env,
    )
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["recall"]["gold"]["1"] == 100.0
    assert json.loads((tmp_path / "hybrid.jsonl.manifest.json").read_text())["fusion"] == "rrf"
    trec = tmp_path / "run.trec"
    assert cli("convert", "--run", run, "--to", "trec", "-o", trec, env=env).returncode == 0
    first = trec.read_text().splitlines()[0].split()
    assert first[:2] == ["1", "Q0"] and first[3] == "1" and first[5] == "ifqa"
    qrels = tmp_path / "gold.qrels"
    assert cli("convert", "--run", run, "--to", "qrels", "-o", qrels, env=env).returncode == 0
    gold = sorted(line.split() for line in qrels.read_text().splitlines())
    assert gold == [["1", "0", "p0", "1"], ["2", "0", "p2", "1"], ["3", "0", "p3", "1"]]  # each question's gold passage
    back = tmp_path / "back.jsonl"
    result = cli(
        "convert",
        "--run",
        trec,
        "--from",
        "trec",
        "--to",
        "run",
        "--questions",
        questions,
        "--corpus",
        corpus,
        "-o",
        back,
        env=env,
    )
    assert result.returncode == 0, result.stderr
    original = [json.loads(line) for line in run.read_text().splitlines()]
    restored = [json.loads(line) for line in back.read_text().splitlines()]
    assert [[c["id"] for c in r["ctxs"]] for r in restored] == [[c["id"] for c in r["ctxs"]] for r in original]
    dpr = tmp_path / "dpr.json"
    assert cli("convert", "--run", run, "--to", "dpr", "-o", dpr, env=env).returncode == 0
    assert json.loads(dpr.read_text())[0]["id"] == "1"


def test_fusion_refuses_different_collections(cli, corpus, questions, tmp_path, env):
    other = tmp_path / "other.jsonl"
    other.write_text(corpus.read_text().replace("Glimmerton", "Glimmertown"))
    bm25.build(corpus, tmp_path / "a", progress=False)
    bm25.build(other, tmp_path / "b", progress=False)
    result = cli(
        "retrieve",
        "--index",
        tmp_path / "a",
        "--index",
        tmp_path / "b",
        "--questions",
        questions,
        "-o",
        tmp_path / "r.jsonl",
        env=env,
    )
    assert result.returncode == 1 and "same collection" in result.stderr
    assert not (tmp_path / "r.jsonl").exists()


def test_settings_that_act_through_another_are_refused_without_it(cli):
    """Every setting declared as depending on another (``DEPENDS_ON``) is refused alone, from Python
    and from the command line, instead of silently doing nothing."""
    import dataclasses

    import pytest

    from ifqa.errors import IfqaError
    from ifqa.retrieval.config import DEPENDS_ON, RetrievalConfig

    defaults = {f.name: f.default for f in dataclasses.fields(RetrievalConfig)}
    other = {"rerank_runtime": "onnx", "rerank_depth": 7, "rerank_precision": "bf16"}
    assert set(DEPENDS_ON) <= set(other)
    for name, needed in DEPENDS_ON.items():
        assert other[name] != defaults[name]
        with pytest.raises(IfqaError, match=f"{name} .* applies to {needed}"):
            RetrievalConfig(**{name: other[name]})
        RetrievalConfig(**{name: other[name], needed: "some-reranker"})  # with it: accepted
    result = cli("retrieve", "--rerank-runtime", "onnx", "--k", "3", "--no-progress")
    assert result.returncode == 1 and len(result.stderr.strip().splitlines()) == 1
    assert "applies to rerank (--rerank)" in result.stderr


def _index_commands_with_force():
    from ifqa.cli import cli as group

    index = subcommands(group)["index"]
    return sorted(
        name for name, command in subcommands(index).items() if any(p.name == "force" for p in command.params)
    )


@pytest.mark.parametrize("kind", _index_commands_with_force())
def test_force_replaces_an_index_only_once_the_new_one_is_complete(cli, corpus, tmp_path, env, kind):
    """``--force`` with a corpus that is refused (or a build that fails) leaves the index that was
    there whole and usable: the new folder takes its place only when complete."""
    assert kind in ("bm25", "dense")
    out = tmp_path / "ix"
    assert cli("index", kind, "--corpus", corpus, "-o", out, "--no-progress", env=env).returncode == 0
    before = {p.relative_to(out): p.read_bytes() for p in out.rglob("*") if p.is_file()}
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    result = cli("index", kind, "--corpus", empty, "-o", out, "--force", "--no-progress", env=env)
    assert result.returncode == 1 and len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert {p.relative_to(out): p.read_bytes() for p in out.rglob("*") if p.is_file()} == before
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []  # no staging left
    assert cli("retrieve", "--index", out, "--query", "river Lune", "--k", "1", env=env).returncode == 0
    assert cli("index", kind, "--corpus", corpus, "-o", out, "--force", "--no-progress", env=env).returncode == 0
