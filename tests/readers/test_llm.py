import json
import os

import pytest

from ifqa.datasets.demo import load_demo
from ifqa.errors import IfqaError
from ifqa.llm import openai_backend
from ifqa.llm.cache import ResponseCache
from ifqa.llm.session import ModelSession
from ifqa.readers.llm import reader as llm
from ifqa.readers.llm.config import LLMReaderConfig
from tests.readers.fake_openai import FakeOpenAI

DEV, TRAIN = load_demo("dev"), load_demo("train")
ANSWERS = {e.question: e.answers[0] for e in DEV + TRAIN}
SECRET = "sk-test-SECRET-4242"


@pytest.fixture
def server():
    with FakeOpenAI(ANSWERS, sampled={0: "Red", 1: "Blue", 2: "red"}) as fake:
        yield fake


@pytest.fixture
def env(tmp_path):
    return {**os.environ, "IFQA_CACHE_DIR": str(tmp_path / "cache"), "OPENAI_API_KEY": SECRET}


def _reader(server, tmp_path, **config):
    backend = openai_backend.OpenAIBackend("test-model", server.url, SECRET, backoff=0.001, timeout=1.0)
    settings = LLMReaderConfig(**{"model": "test-model", **config})
    session = ModelSession(backend, settings, ResponseCache(tmp_path / "cache.sqlite"))
    return llm.LLMReader(session, settings, TRAIN, {e.question for e in DEV})


def _predictions(path):
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_closed_book_through_the_cli_and_scorer(cli, server, env, tmp_path):
    out = tmp_path / "qa.jsonl"
    result = cli(
        "read",
        "--reader",
        "llm",
        "--mode",
        "qa",
        "--model",
        "test-model",
        "--base-url",
        server.url,
        "--demos",
        "3",
        "-o",
        out,
        "--no-progress",
        env=env,
    )
    assert result.returncode == 0, result.stderr
    assert "requests: 24  cache hits: 0" in result.stdout
    prompt = server.requests[0]["messages"][0]["content"]
    assert prompt.startswith("Answer each question with a short phrase") and prompt.count("Question:") == 4
    assert prompt.rstrip().endswith("Answer:")
    report = json.loads(cli("evaluate", "--predictions", out, "--json", env=env).stdout)
    assert report["em"] == 100.0
    manifest = json.loads((tmp_path / "qa.jsonl.manifest.json").read_text())
    assert manifest["counters"]["requests"] == 24 and manifest["prompt_tokens"]["max"] > 0
    # a rerun answers from the cache: no request is sent
    again = cli(
        "read",
        "--reader",
        "llm",
        "--mode",
        "qa",
        "--model",
        "test-model",
        "--base-url",
        server.url,
        "--demos",
        "3",
        "-o",
        out,
        "--no-progress",
        env=env,
    )
    assert "requests: 0  cache hits: 24" in again.stdout and len(server.requests) == 24
    # the key reaches the server, and nothing else
    assert server.headers[0]["authorization"] == f"Bearer {SECRET}"
    for path in [out, tmp_path / "qa.jsonl.manifest.json", *(tmp_path / "cache").iterdir()]:
        assert SECRET.encode() not in path.read_bytes(), path
    assert SECRET not in result.stderr + result.stdout + again.stderr


def test_chain_of_thought_uses_rationales_and_parses_the_answer(server, tmp_path):
    reader = _reader(server, tmp_path, mode="cot", demos=2)
    records = llm.read_to_file(reader, DEV, tmp_path / "cot.jsonl", progress=False)
    assert all(r["prediction"] == ANSWERS[e.question] for r, e in zip(records, DEV))
    assert records[0]["reasoning"].startswith("The premise changes one fact.")
    assert "So the answer is" in records[0]["raw"]
    prompt = server.requests[0]["messages"][0]["content"]
    assert "So the answer is" in prompt and "step by step" in prompt  # demonstrations carry rationales


def test_open_book_puts_retrieved_passages_in_the_prompt(server, tmp_path):
    run = tmp_path / "run.jsonl"
    run.write_text(
        "".join(
            json.dumps(
                {
                    "qid": e.qid,
                    "question": e.question,
                    "answers": e.answers,
                    "ctxs": [
                        {"id": f"{e.qid}-{i}", "title": f"Title {i}", "text": f"passage {i} " * 30} for i in range(8)
                    ],
                }
            )
            + "\n"
            for e in DEV
        )
    )
    reader = _reader(server, tmp_path, mode="open", passages=3, demos=1)
    records = llm.read_to_file(reader, DEV, tmp_path / "open.jsonl", run_path=run, progress=False)
    prompt = server.requests[0]["messages"][0]["content"]
    assert "[3] Title 2: passage 2" in prompt and "[4] Title 3" not in prompt
    assert records[0]["passages"] == 3
    with pytest.raises(IfqaError, match="needs --run"):
        llm.read_to_file(_reader(server, tmp_path, mode="open"), DEV, tmp_path / "x.jsonl", progress=False)


def test_genread_writes_a_background_then_answers_from_it(server, tmp_path):
    reader = _reader(server, tmp_path, mode="genread", demos=1)
    records = llm.read_to_file(reader, DEV[:4], tmp_path / "g.jsonl", progress=False)
    assert len(server.requests) == 8
    assert records[0]["background"].startswith("A background document written for")
    assert "Background document: A background document written for" in server.requests[-1]["messages"][0]["content"]
    assert records[0]["prediction"] == ANSWERS[DEV[0].question]


def test_retries_on_429_500_malformed_and_timeout(server, tmp_path):
    server.failures = ["429", "500", "malformed", "slow"]
    reader = _reader(server, tmp_path, mode="qa", demos=0, concurrency=1)
    records = llm.read_to_file(reader, DEV[:2], tmp_path / "r.jsonl", progress=False)
    assert [r["prediction"] for r in records] == [ANSWERS[e.question] for e in DEV[:2]]
    assert len(server.requests) == 6  # four failures, then two answers
    assert reader.session.counters.as_dict()["retries"] == 4
    from ifqa.artifacts import read_manifest

    assert read_manifest(tmp_path / "r.jsonl")["counters"]["retries"] == 4


def test_interrupted_run_resumes_without_resending(server, tmp_path):
    reader = _reader(server, tmp_path, mode="qa", demos=1, concurrency=1)
    llm.read_to_file(reader, DEV[:10], tmp_path / "part.jsonl", progress=False)  # the first ten got answers
    server.fail_always = True
    with pytest.raises(IfqaError, match="giving up"):
        llm.read_to_file(
            _reader(server, tmp_path, mode="qa", demos=1, concurrency=1), DEV, tmp_path / "all.jsonl", progress=False
        )
    assert not (tmp_path / "all.jsonl").exists()
    server.fail_always = False
    sent_before = len([r for r in server.requests])
    reader = _reader(server, tmp_path, mode="qa", demos=1, concurrency=1)
    records = llm.read_to_file(reader, DEV, tmp_path / "all.jsonl", progress=False)
    assert len(records) == 24 and reader.session.counters.cache_hits == 10 and reader.session.counters.requests == 14
    assert len(server.requests) - sent_before == 14


def test_self_consistency_majority_vote(server, tmp_path):
    reader = _reader(server, tmp_path, mode="qa", demos=0, samples=3, temperature=0.7)
    records = llm.read_to_file(reader, DEV[:1], tmp_path / "sc.jsonl", progress=False)
    assert records[0]["samples"] == ["Red", "Blue", "red"] and records[0]["prediction"] == "Red"
    assert sorted(r["seed"] for r in server.requests) == [0, 1, 2]


def test_prompt_fitting_shortens_passages_then_drops_demos(server, tmp_path):
    run = tmp_path / "run.jsonl"
    run.write_text(
        "".join(
            json.dumps(
                {
                    "qid": e.qid,
                    "question": e.question,
                    "answers": e.answers,
                    "ctxs": [{"id": "a", "title": "T", "text": "word " * 100}] * 5,
                }
            )
            + "\n"
            for e in DEV[:1]
        )
    )
    reader = _reader(server, tmp_path, mode="open", passages=5, demos=4, max_prompt_tokens=420)
    record = llm.read_to_file(reader, DEV[:1], tmp_path / "fit.jsonl", run_path=run, progress=False)[0]
    assert record["prompt_tokens"] <= 420 and record["fit"][0].startswith("passages cut to")
    reader = _reader(server, tmp_path, mode="open", passages=5, demos=4, max_prompt_tokens=60)
    with pytest.raises(IfqaError, match="does not fit"):
        llm.read_to_file(reader, DEV[:1], tmp_path / "nofit.jsonl", run_path=run, progress=False)


def test_completions_api_and_missing_key(cli, server, tmp_path, env):
    result = cli(
        "read",
        "--reader",
        "llm",
        "--mode",
        "qa",
        "--model",
        "m",
        "--base-url",
        server.url,
        "--completions",
        "--demos",
        "0",
        "--no-cache",
        "-o",
        tmp_path / "c.jsonl",
        "--no-progress",
        env=env,
    )
    assert result.returncode == 0, result.stderr
    assert "prompt" in server.requests[0] and "messages" not in server.requests[0]
    no_key = {k: v for k, v in env.items() if k != "OPENAI_API_KEY"}
    result = cli("read", "--reader", "llm", "--model", "gpt-x", "-o", tmp_path / "k.jsonl", env=no_key)
    assert result.returncode == 1 and "no API key" in result.stderr


def test_credentials_in_the_endpoint_url_are_never_written(cli, server, env, tmp_path):
    from ifqa.redact import redact_url

    assert redact_url("https://h/v1?api-key=QUERYSECRET&x=1") == "https://h/v1?api-key=***&x=***"
    url = server.url.replace("http://", "http://user:URLSECRET@")
    out = tmp_path / "cred.jsonl"
    result = cli(
        "-v",
        "read",
        "llm",
        "--model",
        "test-model",
        "--base-url",
        url,
        "--demos",
        "1",
        "-o",
        out,
        "--no-progress",
        env=env,
    )
    assert result.returncode == 0, result.stderr
    manifest = (tmp_path / "cred.jsonl.manifest.json").read_text()
    assert "***@127.0.0.1" in manifest
    assert "URLSECRET" not in manifest and "URLSECRET" not in result.stderr + result.stdout


def test_evaluate_infers_the_question_set_and_refuses_another(cli, server, env, tmp_path):
    out = tmp_path / "train.jsonl"
    assert (
        cli(
            "read",
            "llm",
            "--model",
            "test-model",
            "--base-url",
            server.url,
            "--demos",
            "0",
            "--setting",
            "demo",
            "--split",
            "train",
            "-o",
            out,
            "--no-progress",
            env=env,
        ).returncode
        == 0
    )
    inferred = json.loads(cli("evaluate", "--predictions", out, "--json", env=env).stdout)
    assert inferred["n"] == len(TRAIN) and inferred["em"] == 100.0
    refused = cli("evaluate", "--predictions", out, "--setting", "demo", "--split", "dev", env=env)
    assert refused.returncode == 1 and "made for the question set 'demo:train'" in refused.stderr


@pytest.mark.parametrize("strategy", ["random", "similar"])
def test_a_question_is_never_its_own_demonstration(strategy):
    from ifqa.readers.llm.prompts import Demo, DemoSelector

    demos = [Demo(f"If cats could fly, how far would cat {n} fly?", str(n), []) for n in range(5)]
    selector = DemoSelector(demos, k=4, strategy=strategy, seed=0)
    chosen = selector.select("q", demos[2].question + " ")
    assert len(chosen) == 4 and demos[2] not in chosen
    assert len(selector.select("other", "If dogs could swim, how far would they swim?")) == 4


def test_a_pool_named_by_file_finds_its_rationales(cli, server, env, tmp_path):
    """Rationales belong to questions' texts (SHA-1), not to the setting that named the pool: a copy
    of the training file given with --train is as good as --setting."""
    pool = tmp_path / "train-copy.json"
    pool.write_text(
        json.dumps([{"idx": e.qid, "question": e.question, "answers": e.answers, "context": e.context} for e in TRAIN])
    )
    out = tmp_path / "cot.jsonl"
    result = cli(
        "read",
        "llm",
        "--mode",
        "cot",
        "--demos",
        "2",
        "--model",
        "test-model",
        "--base-url",
        server.url,
        "--train",
        pool,
        "--no-progress",
        "-o",
        out,
        env=env,
    )
    assert result.returncode == 0, result.stderr
    assert "So the answer is" in server.requests[0]["messages"][0]["content"]
