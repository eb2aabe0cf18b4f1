"""The LLM and majority readers on WIQA and CausalQA (demo sets), through the CLI and the fake endpoint."""

import json

import pytest

from ifqa.datasets import QuestionSource
from tests.readers.fake_openai import FakeOpenAI

WIQA_DEV = QuestionSource("wiqa-demo", "dev").load()
CAUSAL_DEV = QuestionSource("causalqa-demo", "dev").load()


@pytest.fixture
def env(tmp_path):
    import os

    return {**os.environ, "IFQA_CACHE_DIR": str(tmp_path / "cache"), "OPENAI_API_KEY": "test"}


def _read(cli, env, url, out, *args):
    result = cli("read", "llm", "--model", "m", "--base-url", url, "-o", out, "--no-progress", *args, env=env)
    assert result.returncode == 0, result.stderr
    return [json.loads(line) for line in out.read_text().splitlines()]


def test_wiqa_reads_the_procedure_and_maps_answers_to_labels(cli, env, tmp_path):
    replies = {
        WIQA_DEV[0].question: "More.",
        WIQA_DEV[1].question: "It would have no effect",
        WIQA_DEV[2].question: "Less",
        WIQA_DEV[3].question: "I cannot tell",
    }
    with FakeOpenAI(replies) as fake:
        records = _read(
            cli, env, fake.url, tmp_path / "wiqa.jsonl", "--setting", "wiqa-demo", "--mode", "context", "--demos", "3"
        )
        prompt = fake.requests[0]["messages"][-1]["content"]
    by_qid = {r["qid"]: r["prediction"] for r in records}
    assert [by_qid[e.qid] for e in WIQA_DEV[:4]] == ["more", "no_effect", "less", ""]  # "" = abstained
    assert "Procedure:\n[1] Snow falls on a mountain year after year." in prompt  # the question's own steps
    assert prompt.count("Procedure:") == 4 and "no_effect" not in prompt  # 3 demonstrations, labels written out
    assert "Answer with exactly one of: more, less, no effect." in prompt
    result = cli("evaluate", "--predictions", tmp_path / "wiqa.jsonl", "--json", env=env)
    report = json.loads(result.stdout)
    right = sum(by_qid[e.qid] == e.answers[0] for e in WIQA_DEV)
    assert report["accuracy"] == round(100 * right / len(WIQA_DEV), 2) and report["answered"] == 3


def test_wiqa_closed_book_chain_of_thought(cli, env, tmp_path):
    with FakeOpenAI({WIQA_DEV[0].question: "more"}) as fake:
        records = _read(
            cli, env, fake.url, tmp_path / "cot.jsonl", "--setting", "wiqa-demo", "--mode", "cot", "--demos", "0"
        )
        prompt = fake.requests[0]["messages"][-1]["content"]
    assert "Procedure:" not in prompt and "step by step" in prompt
    first = next(r for r in records if r["qid"] == WIQA_DEV[0].qid)
    assert first["prediction"] == "more" and first["reasoning"]


def test_a_mode_without_a_template_for_the_task_is_one_line(cli, env, tmp_path):
    result = cli(
        "read",
        "llm",
        "--model",
        "m",
        "--base-url",
        "http://127.0.0.1:9/v1",
        "--setting",
        "wiqa-demo",
        "--mode",
        "genread",
        "-o",
        tmp_path / "x.jsonl",
        env=env,
    )
    assert (
        result.returncode == 1
        and "no genread template for wiqa (wiqa_genread.txt); its templates: wiqa_context" in result.stderr
    )


def test_causalqa_context_mode_gives_the_source_passage(cli, env, tmp_path):
    squad = next(e for e in CAUSAL_DEV if e.meta["source"] == "squad2")
    with FakeOpenAI({squad.question: "Because ice is less dense than liquid water."}) as fake:
        records = _read(
            cli, env, fake.url, tmp_path / "c.jsonl", "--setting", "causalqa-demo", "--mode", "context", "--demos", "1"
        )
        prompts = [r["messages"][-1]["content"] for r in fake.requests]
    prompt = next(p for p in prompts if p.rstrip().endswith(f"Question: {squad.question}\nAnswer:"))
    assert squad.context[0] in prompt
    assert (
        next(r for r in records if r["qid"] == squad.qid)["prediction"] == "Because ice is less dense than liquid water"
    )
    report = json.loads(cli("evaluate", "--predictions", tmp_path / "c.jsonl", "--json", env=env).stdout)
    assert report["task"] == "causalqa" and report["by_source"]["squad2"]["rouge_l_f1"] > 0


def test_majority_reader_predicts_the_most_frequent_training_label(cli, tmp_path):
    out = tmp_path / "m.jsonl"
    assert cli("read", "majority", "--setting", "wiqa-demo", "-o", out).returncode == 0
    train = QuestionSource("wiqa-demo", "train").load()
    labels = [e.answers[0] for e in train]
    expected = max(sorted(set(labels)), key=labels.count)
    predictions = {json.loads(line)["prediction"] for line in out.read_text().splitlines()}
    assert predictions == {expected}
    manifest = json.loads((tmp_path / "m.jsonl.manifest.json").read_text())
    assert manifest["answer"] == expected and manifest["train"]["name"] == "wiqa-demo:train"


def test_majority_reader_needs_a_training_set_for_a_question_file(cli, tmp_path):
    from importlib import resources

    with resources.as_file(resources.files("ifqa.demo") / "questions_dev.json") as questions:
        result = cli("read", "majority", "--questions", questions, "-o", tmp_path / "m.jsonl")
    assert result.returncode == 1 and "--train FILE or --setting NAME" in result.stderr
    assert not (tmp_path / "m.jsonl").exists()


def test_causalqa_open_book_reads_retrieved_wikipedia_passages(cli, env, tmp_path):
    run = tmp_path / "run.jsonl"
    made = cli("retrieve", "--setting", "causalqa-demo", "--k", "3", "-o", run, "--no-progress", env=env)
    assert made.returncode == 0, made.stderr
    first = json.loads(run.read_text().splitlines()[0])
    with FakeOpenAI({}) as fake:
        _read(
            cli,
            env,
            fake.url,
            tmp_path / "open.jsonl",
            "--setting",
            "causalqa-demo",
            "--mode",
            "open",
            "--run",
            run,
            "--passages",
            "2",
            "--demos",
            "1",
        )
        prompts = [r["messages"][-1]["content"] for r in fake.requests]
    prompt = next(p for p in prompts if p.rstrip().endswith(f"Question: {first['question']}\nAnswer:"))
    assert first["ctxs"][0]["text"][:80] in prompt and "Wikipedia passages" in prompt
