"""`ifqa analyze premise`: factual twins, the model answering them, and each counterfactual prediction
classified as correct, memory (the model's own factual answer) or other, for every kind of reading."""

import json
import os
import re

import pytest

from ifqa.analysis.premise import classify
from ifqa.analysis.twins import rule_twin
from ifqa.datasets.demo import load_demo
from tests.readers.fake_openai import FakeOpenAI

DEV = load_demo("dev")
GOLD = {e.question: e.answers[0] for e in DEV}
MEMORY = "Remembered Fact"


@pytest.fixture
def env(tmp_path):
    return {**os.environ, "IFQA_CACHE_DIR": str(tmp_path / "cache"), "OPENAI_API_KEY": "sk-test"}


def model(prompt: str, body: dict) -> str:
    """Answers a twin (no premise) from memory; a counterfactual question right for the first third,
    from memory for the second, otherwise wrong."""
    question = re.findall(r"Question: (.*)", prompt)[-1].strip()
    if question not in GOLD:
        return f" {MEMORY}\n"
    n = [e.question for e in DEV].index(question)
    return f" {GOLD[question] if n < 8 else MEMORY if n < 16 else 'Something Else'}\n"


@pytest.mark.parametrize("mode", ["qa", "open", "context"])
def test_the_premise_report_for_a_reader(cli, env, tmp_path, mode):
    with FakeOpenAI({}) as server:
        server.script = model
        preds = tmp_path / "preds.jsonl"
        args = ["read", "llm", "--mode", mode, "--model", "m", "--base-url", server.url, "--demos", "0", "-o", preds]
        if mode == "open":
            assert cli("retrieve", "--k", "5", "-o", tmp_path / "run.jsonl", "--no-progress", env=env).returncode == 0
            args += ["--run", tmp_path / "run.jsonl"]
        assert cli(*args, "--no-progress", env=env).returncode == 0
        out = tmp_path / "premise"
        result = cli("analyze", "premise", "--predictions", preds, "-o", out, "--json", "--no-progress", env=env)
        assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["all"]["correct"] == pytest.approx(100 * 8 / 24, abs=0.01)
    assert report["all"]["memory"] == pytest.approx(100 * 8 / 24, abs=0.01)
    rows = [json.loads(line) for line in (out / "premise.jsonl").read_text().splitlines()]
    assert round(100 * sum(r["class"] == "memory" for r in rows) / len(rows), 2) == report["all"]["memory"]
    assert sum(g["n"] for g in report["by_evidence"].values()) == 24
    if mode == "qa":
        assert set(report["by_evidence"]) == {"no passages"}
    else:
        assert "no passages" not in report["by_evidence"]
    twins = [json.loads(line)["question"] for line in (out / "twins.jsonl").read_text().splitlines()]
    assert all(not t.lower().startswith("if ") for t in twins)
    assert (out / "twin-predictions.jsonl.manifest.json").exists()


def twin_writer(prompt: str, body: dict) -> str:
    """Writes a twin when asked to (the question's main clause, labelled as the prompt's examples
    are), otherwise answers as ``model`` does."""
    if "Factual twin:" not in prompt.rstrip()[-len("Factual twin:") :]:
        return model(prompt, body)
    question = re.findall(r"Question: (.*)", prompt)[-1].strip()
    return f"Factual twin: {rule_twin(question)}\n"


def test_twins_written_by_the_model_are_kept_with_its_reply_and_not_asked_twice(cli, env, tmp_path):
    with FakeOpenAI({}) as server:
        server.script = twin_writer
        preds = tmp_path / "preds.jsonl"
        read = cli("read", "llm", "--model", "m", "--base-url", server.url, "--demos", "0", "-o", preds, env=env)
        assert read.returncode == 0, read.stderr
        args = ["analyze", "premise", "--predictions", preds, "--twins", "llm", "--json", "--no-progress"]
        result = cli(*args, "-o", tmp_path / "a", env=env)
        assert result.returncode == 0, result.stderr
        asked = len(server.requests)
        again = cli(*args, "-o", tmp_path / "b", env=env)
        assert again.returncode == 0 and len(server.requests) == asked  # every twin and answer from the cache
    records = [json.loads(line) for line in (tmp_path / "a" / "twins.jsonl").read_text().splitlines()]
    assert [r["question"] for r in records] == [rule_twin(e.question) for e in DEV]
    assert {r["how"] for r in records} == {"llm"} and all(r["raw"].startswith("Factual twin:") for r in records)
    assert len({r["prompt_sha256"] for r in records}) == 1
    assert json.loads(result.stdout)["all"]["memory"] == pytest.approx(100 * 8 / 24, abs=0.01)
    assert (tmp_path / "b" / "twins.jsonl").read_bytes() == (tmp_path / "a" / "twins.jsonl").read_bytes()


def test_a_twin_reply_without_a_question_is_one_line_and_writes_nothing(cli, env, tmp_path):
    with FakeOpenAI({}) as server:
        server.script = lambda prompt, body: "\n\n" if "Factual twin:" in prompt else model(prompt, body)
        preds = tmp_path / "preds.jsonl"
        assert cli("read", "llm", "--model", "m", "--base-url", server.url, "-o", preds, env=env).returncode == 0
        out = tmp_path / "premise"
        result = cli(
            "analyze", "premise", "--predictions", preds, "--twins", "llm", "-o", out, "--no-progress", env=env
        )
    assert result.returncode == 1 and "holds no question" in result.stderr and "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 and not out.exists()


def test_twins_from_a_file_must_match_the_questions(cli, env, tmp_path):
    preds = tmp_path / "preds.jsonl"
    preds.write_text("".join(json.dumps({"qid": e.qid, "prediction": e.answers[0]}) + "\n" for e in DEV))
    twins = tmp_path / "twins.jsonl"
    twins.write_text("".join(json.dumps({"qid": e.qid, "question": rule_twin(e.question)}) + "\n" for e in DEV[:-1]))
    out = tmp_path / "premise"
    result = cli("analyze", "premise", "--predictions", preds, "--twins", twins, "-o", out, env=env)
    assert result.returncode == 1 and "do not match the questions" in result.stderr and "Traceback" not in result.stderr
    assert not out.exists()


def test_predictions_of_a_reader_without_a_model_need_their_twin_predictions(cli, env, tmp_path):
    preds = tmp_path / "majority.jsonl"
    assert cli("read", "majority", "-o", preds, env=env).returncode == 0
    result = cli("analyze", "premise", "--predictions", preds, "-o", tmp_path / "p", env=env)
    assert result.returncode == 1 and "--twin-predictions" in result.stderr and not (tmp_path / "p").exists()
    twin_preds = tmp_path / "twin.jsonl"
    twin_preds.write_text("".join(json.dumps({"qid": e.qid, "prediction": "1828"}) + "\n" for e in DEV))
    result = cli(
        "analyze",
        "premise",
        "--predictions",
        preds,
        "--twin-predictions",
        twin_preds,
        "-o",
        tmp_path / "p",
        "--json",
        env=env,
    )
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["all"]["memory"] == 100.0  # the majority answer is its 'memory' everywhere


def test_rule_twins_and_classes():
    assert rule_twin("If the river dried up, what would the bridge cross?") == "What does the bridge cross?"
    assert rule_twin("If Napoleon had won, who would have been king?") == "Who was king?"
    assert classify("It would be Paris, I think", "London", ["Paris"]) == "correct"
    assert classify("London", "London", ["Paris"]) == "memory"
    assert classify("Rome", "London", ["Paris"]) == "other" and classify("", "", ["Paris"]) == "other"


def test_the_premise_report_for_iterative_reading(cli, env, tmp_path):
    from tests.readers.test_iterative import searcher

    with FakeOpenAI({}) as server:
        server.script = lambda prompt, body: searcher(prompt, body) if "<search>" in prompt else model(prompt, body)
        preds = tmp_path / "iterative.jsonl"
        args = ["read", "iterative", "--model", "m", "--base-url", server.url, "-o", preds, "--no-progress"]
        assert cli(*args, env=env).returncode == 0
        result = cli("analyze", "premise", "--predictions", preds, "-o", tmp_path / "p", "--json", env=env)
        assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["reader"] == "iterative" and report["all"]["correct"] == 100.0
    assert "no passages" not in report["by_evidence"] and sum(g["n"] for g in report["by_evidence"].values()) == 24


def _llm_predictions(cli, env, tmp_path, server, questions=None, *options):
    preds = tmp_path / "preds.jsonl"
    args = ["read", "llm", "--model", "m", "--base-url", server.url, "--demos", "0", "-o", preds, "--no-progress"]
    assert cli(*args, *(["--questions", questions] if questions else []), *options, env=env).returncode == 0
    return preds


def _refused(result, expected, *absent):
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 1 and len(lines) == 1 and expected in lines[0] and "Traceback" not in result.stderr, (
        lines
    )
    assert not any(path.exists() for path in absent)


def test_every_input_of_the_analysis_is_checked_against_the_questions(cli, env, tmp_path):
    """Twin predictions lacking a question or made for another set, a twins file naming a question twice:
    refused in one line as every command refuses its inputs, nothing written."""
    preds = tmp_path / "majority.jsonl"
    assert cli("read", "majority", "-o", preds, env=env).returncode == 0
    out = tmp_path / "premise"
    args = ["analyze", "premise", "--predictions", preds, "-o", out]
    short = tmp_path / "short.jsonl"
    short.write_text("".join(json.dumps({"qid": e.qid, "prediction": "x"}) + "\n" for e in DEV[:-1]))
    _refused(cli(*args, "--twin-predictions", short, env=env), f"no twin prediction for qid {DEV[-1].qid!r}", out)
    other = tmp_path / "other.jsonl"  # the questions' own texts, not their twins'
    other.write_text("".join(json.dumps({"qid": e.qid, "question": e.question, "prediction": "x"}) + "\n" for e in DEV))
    _refused(cli(*args, "--twin-predictions", other, env=env), "not", out)
    twice = tmp_path / "twins.jsonl"
    twice.write_text(
        "".join(json.dumps({"qid": e.qid, "question": rule_twin(e.question)}) + "\n" for e in [*DEV, DEV[0]])
    )
    _refused(cli(*args, "--twins", twice, env=env), "has a twin twice", out)


@pytest.mark.parametrize("reply", ["I cannot rewrite this.", "Sure! Here it is."])
def test_a_model_twin_that_is_no_question_is_never_asked(cli, env, tmp_path, reply):
    with FakeOpenAI({}) as server:
        server.script = lambda prompt, body: reply if "Factual twin:" in prompt else model(prompt, body)
        preds = _llm_predictions(cli, env, tmp_path, server)
        asked = len(server.requests)
        out = tmp_path / "premise"
        result = cli(
            "analyze", "premise", "--predictions", preds, "--twins", "llm", "-o", out, "--no-progress", env=env
        )
        answered = [r for r in server.requests[asked:] if "Factual twin:" not in r["messages"][-1]["content"]]
    _refused(result, "holds no question", out)
    assert not answered and not list(tmp_path.glob(".premise*"))  # nothing asked as a twin, no staging left


def test_a_failed_twin_read_leaves_nothing(cli, env, tmp_path):
    with FakeOpenAI({}) as server:
        server.script = model
        preds = _llm_predictions(cli, env, tmp_path, server, None, "--retries", "0")  # the twins' model's too
        server.fail_always = True
        out = tmp_path / "premise"
        result = cli("analyze", "premise", "--predictions", preds, "-o", out, "--no-progress", env=env)
    assert result.returncode == 1 and not out.exists() and not list(tmp_path.glob(".premise*"))


def test_twins_are_asked_as_factual_questions_and_questions_without_a_premise_are_apart(cli, env, tmp_path):
    questions = tmp_path / "q.jsonl"
    rows = [{"idx": e.qid, "question": e.question, "answers": e.answers, "context": e.context} for e in DEV[:4]]
    rows.append({"idx": "plain", "question": "What is the capital of France?", "answers": ["Paris"]})
    questions.write_text("".join(json.dumps(r) + "\n" for r in rows))
    with FakeOpenAI({}) as server:
        server.script = lambda prompt, body: " Remembered Fact\n"
        preds = _llm_predictions(cli, env, tmp_path, server, questions)
        asked = len(server.requests)
        out = tmp_path / "premise"
        result = cli("analyze", "premise", "--predictions", preds, "-o", out, "--json", "--no-progress", env=env)
        assert result.returncode == 0, result.stderr
        twin_prompts = [r["messages"][-1]["content"] for r in server.requests[asked:]]
    assert twin_prompts and not any("premise" in p for p in twin_prompts)  # no counterfactual instruction
    report = json.loads(result.stdout)
    assert report["no_premise"] == {"n": 1, "qids": ["plain"]} and report["all"]["n"] == 4
    rows = {r["qid"]: r for r in (json.loads(line) for line in (out / "premise.jsonl").read_text().splitlines())}
    assert rows["plain"]["class"] == "no premise" and report["all"]["memorization_ratio"] == 100.0
