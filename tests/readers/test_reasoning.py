"""Reasoning models: the answer read after the thinking in every shape servers send, a thinking cut off
never a prediction, and the budgets and parameters each kind of endpoint takes."""

import json
import os

import pytest

from ifqa.datasets.demo import load_demo
from ifqa.llm.thinking import split
from tests.readers.fake_openai import SHAPES, FakeOpenAI
from tests.readers.tiny_models import tiny_llama

DEV, TRAIN = load_demo("dev"), load_demo("train")
ANSWERS = {e.question: e.answers[0] for e in DEV + TRAIN}


@pytest.fixture
def env(tmp_path):
    return {**os.environ, "IFQA_CACHE_DIR": str(tmp_path / "cache"), "OPENAI_API_KEY": "sk-test"}


def _read(cli, env, out, url, *options):
    args = ["read", "llm", "--base-url", url, "--demos", "2", "-o", out, "--no-progress", *options]
    return cli(*args, env=env)


def _records(path):
    return [json.loads(line) for line in path.read_text().splitlines()]


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("mode", ["qa", "cot"])
def test_the_answer_after_the_thinking_in_every_shape(cli, env, tmp_path, shape, mode):
    """A model recognised by its name as a reasoning model: every answer is the one after its thinking."""
    with FakeOpenAI(ANSWERS) as server:
        server.thinking = shape
        out = tmp_path / "p.jsonl"
        result = _read(cli, env, out, server.url, "--model", "deepseek-r1-distill-test", "--mode", mode)
        assert result.returncode == 0, result.stderr
        body = server.requests[0]
        assert body["max_tokens"] == 8192 and "stop" not in body  # room to think; no stop cuts its thinking
    records = _records(out)
    assert all(not r.get("truncated") and "Wait, reconsider" in r["reasoning"] for r in records)
    assert not any("think" in r["prediction"] or "unknown" in r["prediction"] for r in records)
    report = json.loads(cli("evaluate", "--predictions", out, "--json", env=env).stdout)
    assert report["em"] == 100.0
    manifest = json.loads((tmp_path / "p.jsonl.manifest.json").read_text())
    assert manifest["thinks"] is True and manifest["counters"]["truncated"] == 0
    assert manifest["counters"]["reasoning_tokens"] > 0  # reported by the server, or counted in the inline block


@pytest.mark.parametrize("shape", SHAPES)
def test_a_thinking_cut_off_is_an_empty_prediction_marked_truncated(cli, env, tmp_path, shape):
    with FakeOpenAI(ANSWERS) as server:
        server.thinking = shape
        out = tmp_path / "p.jsonl"
        result = _read(cli, env, out, server.url, "--model", "test-model", "--thinking", "on", "--max-tokens", "20")
        assert result.returncode == 0, result.stderr
    records = _records(out)
    assert all(r["prediction"] == "" and r["truncated"] for r in records)
    assert "cut off while thinking: 24" in result.stdout
    assert json.loads((tmp_path / "p.jsonl.manifest.json").read_text())["counters"]["truncated"] == 24


def test_a_plain_model_default_never_reads_a_draft_from_the_thinking(cli, env, tmp_path):
    """The defect: a model not known to think, read with plain defaults (32 tokens, blank-line stops):
    its thinking is cut, and the cut thinking is no prediction."""
    with FakeOpenAI(ANSWERS) as server:
        server.thinking = "open"
        for mode in ("qa", "cot"):
            out = tmp_path / f"{mode}.jsonl"
            result = _read(cli, env, out, server.url, "--model", "test-model", "--mode", mode)
            assert result.returncode == 0, result.stderr
            records = _records(out)
            assert not any("unknown" in r["prediction"] or "</think>" in r["prediction"] for r in records)


def test_budgets_and_the_thinking_switch_are_sent(cli, env, tmp_path):
    with FakeOpenAI(ANSWERS) as server:
        server.thinking = "think"
        out = tmp_path / "p.jsonl"
        result = _read(cli, env, out, server.url, "--model", "test-model", "--thinking-budget", "10")
        assert result.returncode == 0, result.stderr
        body = server.requests[0]
        assert body["thinking_token_budget"] == body["thinking_budget_tokens"] == 10
        assert body["max_tokens"] == 8192
        assert all(r["prediction"] and len(r["reasoning"].split()) <= 10 for r in _records(out))
        server.requests.clear()
        result = _read(cli, env, tmp_path / "off.jsonl", server.url, "--model", "qwen3-test", "--thinking", "off")
        assert result.returncode == 0, result.stderr
        assert server.requests[0]["chat_template_kwargs"] == {"enable_thinking": False}
        assert server.requests[0]["max_tokens"] == 32  # a model asked not to think reads with plain defaults


def test_openai_reasoning_models_get_their_parameters(cli, env, tmp_path):
    with FakeOpenAI(ANSWERS) as server:
        server.thinking = "reasoning_content"
        out = tmp_path / "p.jsonl"
        result = _read(cli, env, out, server.url, "--model", "o3-mini", "--reasoning-effort", "low")
        assert result.returncode == 0, result.stderr
        body = server.requests[0]
        assert body["max_completion_tokens"] == 8192 and body["reasoning_effort"] == "low"
        assert not {"max_tokens", "temperature", "top_p", "stop"} & set(body)
        assert json.loads(cli("evaluate", "--predictions", out, "--json", env=env).stdout)["em"] == 100.0


def test_a_rerun_of_a_reasoning_run_sends_nothing(cli, env, tmp_path):
    with FakeOpenAI(ANSWERS) as server:
        server.thinking = "reasoning"
        out = tmp_path / "p.jsonl"
        assert _read(cli, env, out, server.url, "--model", "qwq-test").returncode == 0
        first = out.read_bytes()
        count = len(server.requests)
        result = _read(cli, env, out, server.url, "--model", "qwq-test")
        assert result.returncode == 0 and len(server.requests) == count and out.read_bytes() == first


@pytest.mark.parametrize("refused", ["reasoning_effort", "thinking_token_budget"])
def test_a_reasoning_parameter_the_endpoint_refuses_is_named(cli, env, tmp_path, refused):
    """The settings that cannot work together are rows of tests/test_bad_inputs.py; this one needs a server."""
    with FakeOpenAI(ANSWERS) as server:
        server.refuse = {refused}
        out = tmp_path / "p.jsonl"
        options = ["--reasoning-effort", "high"] if refused == "reasoning_effort" else ["--thinking-budget", "5"]
        result = _read(cli, env, out, server.url, "--model", "test-model", *options)
    errors = [line for line in result.stderr.splitlines() if "error" in line]
    assert result.returncode == 1 and len(errors) == 1 and "Traceback" not in result.stderr
    assert ("reasoning_effort=high" if refused == "reasoning_effort" else "thinking budget 5") in errors[0]
    assert not out.exists()


def test_split_keeps_the_answer_after_the_last_closing_tag():
    assert split("<think>a\n\nb</think>\n\nParis").answer == "Paris"
    assert split("draft</think>Paris", thinks=True) == split("<think>draft</think>Paris")
    assert split("Paris <think>more thought").answer == "Paris"  # thinking resumed after an answer
    assert split("<THINKING>x</THINKING> Lyon").answer == "Lyon"
    assert split("Lyon", finish_reason="length").answer == "Lyon"  # a plain model cut short keeps its text


@pytest.fixture(scope="module")
def thinking_model(tmp_path_factory):
    return tiny_llama(tmp_path_factory.mktemp("thinking-llama"), thinking=True)


def _read_local(cli, tmp_path, model, *options):
    env = {**os.environ, "IFQA_CACHE_DIR": str(tmp_path / "cache")}
    out = tmp_path / "hf.jsonl"
    args = ["read", "llm", "--backend", "hf", "--model", model, "--demos", "0", "-o", out, "--no-progress"]
    result = cli(*args, "--setting", "demo", *options, env=env)
    assert result.returncode == 0, result.stderr
    return _records(out), json.loads((tmp_path / "hf.jsonl.manifest.json").read_text())


def test_a_local_model_whose_template_thinks(cli, thinking_model, tmp_path):
    """The template opened <think>: the record keeps the block; a completion that never closes it is truncated."""
    records, manifest = _read_local(cli, tmp_path / "cut", thinking_model, "--max-tokens", "6")
    assert manifest["thinks"] is True
    assert all(r["raw"].startswith("<think>") for r in records)
    closed = [r for r in records if "</think>" in r["raw"]]
    assert all(r["prediction"] == "" and r["truncated"] for r in records if r not in closed)
    assert manifest["counters"]["truncated"] == len(records) - len(closed) > 0


def test_a_local_thinking_budget_closes_the_thinking(cli, thinking_model, tmp_path):
    records, manifest = _read_local(
        cli, tmp_path / "budget", thinking_model, "--max-tokens", "16", "--thinking-budget", "4"
    )
    assert all("</think>" in r["raw"] and not r.get("truncated") for r in records)
    assert all(0 < r["reasoning_tokens"] <= 4 + 2 for r in records)  # the budget, and the forced newline re-tokenized


def test_a_local_template_switched_off_does_not_think(cli, thinking_model, tmp_path):
    records, manifest = _read_local(cli, tmp_path / "off", thinking_model, "--max-tokens", "6", "--thinking", "off")
    assert manifest["thinks"] is False and not any(
        r.get("truncated") or r["raw"].startswith("<think>") for r in records
    )


@pytest.mark.parametrize("job", ["read", "judge"])
def test_reading_and_judging_keep_the_endpoint_busy(cli, env, tmp_path, job):
    """Against an endpoint that takes `latency` a reply, exactly `concurrency` requests are in flight at
    once (never serialized behind each other, never more than asked), so the work takes far less than
    questions x latency. The wall-clock bound is loose on purpose: a loaded CI host stretches it."""
    latency, concurrency = 0.25, 4
    with FakeOpenAI(ANSWERS, latency=latency) as server:
        out = tmp_path / "p.jsonl"
        result = _read(cli, env, out, server.url, "--model", "m", "--concurrency", str(concurrency))
        assert result.returncode == 0, result.stderr
        if job == "judge":
            server.peak_in_flight = 0
            judged = tmp_path / "j.jsonl"
            args = ["judge", "--predictions", out, "--model", "j", "--base-url", server.url, "-o", judged]
            assert cli(*args, "--concurrency", str(concurrency), "--no-progress", env=env).returncode == 0
            out = judged
        assert server.peak_in_flight == concurrency
    seconds = json.loads((tmp_path / f"{out.name}.manifest.json").read_text())["seconds"]
    assert seconds < 0.5 * len(DEV) * latency, seconds  # serialized, it would take len(DEV) x latency


@pytest.mark.parametrize(
    "model, thinks",
    [
        ("deepseek-ai/DeepSeek-R1-Distill-Qwen-7B", True),
        ("Qwen/QwQ-32B", True),
        ("/models/gpt-oss-20b/", True),
        ("/home/me/reasoning-eval/models/Llama-3.2-1B-Instruct-Q4_K_M.gguf", False),
        ("/data/o1/llama.gguf", False),
        ("/scratch/thinking/phi-3.gguf", False),
    ],
)
def test_a_reasoning_model_is_told_by_its_own_name_not_its_folders(model, thinks):
    from ifqa.llm.thinking import resolve

    assert resolve("auto", model) is thinks
