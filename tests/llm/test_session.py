"""One model session under every command that prompts a model: each reads a reasoning model's answer
after its thinking and counts a reply cut off while thinking, through ``ModelSession`` (the table of
prompting commands is held to the command line, so a new one is covered by adding its row)."""

import ast
import json
import os
import re
from pathlib import Path

import pytest

from ifqa.datasets.demo import load_demo
from ifqa.errors import IfqaError
from tests.readers.fake_openai import FakeOpenAI

DEV = load_demo("dev")
GOLD = {e.question: e.answers[0] for e in DEV}
PACKAGE = Path(__file__).resolve().parents[2] / "ifqa"


@pytest.fixture
def env(tmp_path):
    return {**os.environ, "IFQA_CACHE_DIR": str(tmp_path / "cache"), "OPENAI_API_KEY": "sk-test"}


def _lines(path):
    return [json.loads(line) for line in Path(path).read_text().splitlines()]


def _answers(prompt: str, body: dict) -> str:
    """A model answering each question in the form each prompt asks for."""
    if "Predicted answer:" in prompt:
        return "The prediction names the gold answer.\nVerdict: yes"
    if "Factual twin:" in prompt:
        return "What is the real fact?"
    if "search queries" in prompt:
        return "Alabama border\nGershwin year"
    question = re.findall(r"Question: (.*)", prompt)[-1].strip()
    if "<search>" in prompt:
        return f"<answer>{GOLD.get(question, 'x')}</answer>"
    return f" {GOLD.get(question, 'Remembered')}\n"


def _read_llm(cli, env, tmp_path, url, *options):
    out = tmp_path / "llm.jsonl"
    args = ["read", "llm", "--model", "m", "--base-url", url, "--demos", "0", "-o", out, "--no-progress"]
    return cli(*args, *options, env=env), out


def _read_iterative(cli, env, tmp_path, url, *options):
    out = tmp_path / "iterative.jsonl"
    args = ["read", "iterative", "--model", "m", "--base-url", url, "-o", out, "--no-progress", "--max-steps", "2"]
    return cli(*args, *options, env=env), out


def _predictions(tmp_path):
    path = tmp_path / "given.jsonl"
    path.write_text("".join(json.dumps({"qid": e.qid, "prediction": e.answers[0]}) + "\n" for e in DEV))
    return path


def _judge(cli, env, tmp_path, url, *options):
    out = tmp_path / "judged.jsonl"
    args = ["judge", "--predictions", _predictions(tmp_path), "--model", "m", "--base-url", url, "-o", out]
    return cli(*args, "--no-progress", *options, env=env), out


def _premise(cli, env, tmp_path, url, *options):
    result, predictions = _read_llm(cli, env, tmp_path, url, *options)
    assert result.returncode == 0, result.stderr
    out = tmp_path / "premise"
    args = ["analyze", "premise", "--predictions", predictions, "--twins", "llm", "-o", out, "--no-progress"]
    return cli(*args, env=env), out / "twins.jsonl"


#: Every command that prompts a model, by its command path: how to run it against a stand-in server.
PROMPTING = {
    "read llm": _read_llm,
    "read iterative": _read_iterative,
    "judge": _judge,
    "analyze premise": _premise,
}


def test_the_table_holds_every_command_that_prompts():
    """A command taking the model settings (``--thinking``) is a row above (``ifqa serve`` and query
    rewriting are tested below: their model is an option of retrieval)."""
    from ifqa.cli import cli as root
    from ifqa.cli.help import leaf_commands

    prompting = {
        path.removeprefix("ifqa ")
        for path, command in leaf_commands(root)
        if any(p.name == "thinking" for p in command.params)
    }
    # analyze premise prompts the predictions' own model (read from their manifest), so it takes none of them
    assert (prompting - {"serve"}) | {"analyze premise"} == set(PROMPTING)


@pytest.mark.parametrize("command", PROMPTING)
def test_every_command_reads_after_the_thinking(cli, env, tmp_path, command):
    with FakeOpenAI({}) as server:
        server.script, server.thinking = _answers, "think"
        result, out = PROMPTING[command](cli, env, tmp_path, server.url, "--thinking", "on")
        assert result.returncode == 0, result.stderr
    written = Path(out).read_text()
    records = _lines(out)
    assert records and "Wait, reconsider" not in json.dumps([r.get("prediction", r.get("question")) for r in records])
    if command in ("read llm", "read iterative"):
        assert sum(r["prediction"] == GOLD[e.question] for r, e in zip(records, DEV)) == len(DEV)
    if command == "judge":
        assert all(r["verdict"] is True for r in records)
    if command == "analyze premise":
        assert all(r["question"] == "What is the real fact?" for r in records), written[:300]


@pytest.mark.parametrize("command", ["read llm", "read iterative"])
def test_a_reply_cut_off_while_thinking_is_counted_once_where_records_say_so(cli, env, tmp_path, command):
    with FakeOpenAI({}) as server:
        server.script, server.thinking = _answers, "think"
        result, out = PROMPTING[command](cli, env, tmp_path, server.url, "--thinking", "on", "--max-tokens", "12")
        assert result.returncode == 0, result.stderr
    records = _lines(out)
    cut = sum(bool(r.get("truncated")) for r in records)
    assert cut == len(DEV) and f"cut off while thinking: {cut}" in result.stdout
    manifest = json.loads(Path(f"{out}.manifest.json").read_text())
    assert manifest["counters"]["truncated"] == cut and manifest["thinks"] is True


def test_query_rewriting_reads_queries_after_the_thinking(env, tmp_path, monkeypatch):
    import ifqa

    monkeypatch.setenv("IFQA_CACHE_DIR", env["IFQA_CACHE_DIR"])
    with FakeOpenAI({}) as server:
        server.script, server.thinking = _answers, "think"
        pipeline = ifqa.Pipeline(query_mode="rewrite", rewrite_model="deepseek-r1-test", rewrite_base_url=server.url)
        [queries] = pipeline.formulate([DEV[0].question])
    assert queries[1:] == ["Alabama border", "Gershwin year"]  # no line of the thinking became a query


def test_serve_reads_after_the_thinking(env, tmp_path, monkeypatch):
    from ifqa.readers.llm.config import LLMReaderConfig
    from ifqa.retrieval.config import RetrievalConfig
    from ifqa.serve.service import QAService

    monkeypatch.setenv("IFQA_CACHE_DIR", env["IFQA_CACHE_DIR"])
    with FakeOpenAI({}) as server:
        server.script, server.thinking = _answers, "think"
        reader = LLMReaderConfig(model="m", base_url=server.url, demos=0, thinking="on")
        service = QAService(RetrievalConfig(), reader, api_key="sk-test")
        answer = service.answer(DEV[0].question, k=3)["answer"]
    assert answer["prediction"] == GOLD[DEV[0].question] and "Wait, reconsider" in answer["reasoning"]


def test_only_the_session_splits_a_reply_or_makes_a_backend():
    """No module outside ifqa/llm/ reads a completion's thinking or builds a backend itself."""
    offenders = []
    for path in PACKAGE.rglob("*.py"):
        if path.parent.name == "llm" and path.parent.parent == PACKAGE:
            continue
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Attribute)
                and node.attr in ("split",)
                and getattr(node.value, "id", "") == "thinking"
            ):
                offenders.append(f"{path.name}: thinking.split")
            if isinstance(node, ast.Name) and node.id in ("CachedGenerator", "backend_instance"):
                offenders.append(f"{path.name}: {node.id}")
            if isinstance(node, ast.Attribute) and node.attr == "backend_instance":
                offenders.append(f"{path.name}: backend_instance")
    assert offenders == []


@pytest.mark.parametrize("command", ["read llm", "read iterative"])
def test_device_is_refused_only_where_nothing_but_the_model_would_read_it(cli, env, tmp_path, command):
    """An endpoint's model reads no --device: `read llm` refuses it in one line; `read iterative` and
    `serve` read it for retrieval and reranking too, so they take it (and so does the premise analysis
    reading the iterative predictions' settings back)."""
    from ifqa.readers.llm.config import LLMReaderConfig, SharedDeviceReaderConfig

    with FakeOpenAI({}) as server:
        server.script = _answers
        result, out = PROMPTING[command](cli, env, tmp_path, server.url, "--device", "cpu")
        if command == "read llm":
            assert result.returncode == 1 and "--device cpu: the openai backend does not read it" in result.stderr
            assert result.stderr.count("\n") == 1 and not Path(out).exists()
        else:  # and its predictions' own model, asked their twins, reads as they were read
            assert result.returncode == 0, result.stderr
            args = ["analyze", "premise", "--predictions", out, "--twins", "llm", "-o", tmp_path / "premise"]
            analyzed = cli(*args, "--no-progress", env=env)
            assert analyzed.returncode == 0, analyzed.stderr
    assert (
        SharedDeviceReaderConfig(model="m", device="cpu").backend_instance(api_key="sk-test").describe()["model"] == "m"
    )
    with pytest.raises(IfqaError, match="does not read it"):
        LLMReaderConfig(model="m", device="cpu").backend_instance(api_key="sk-test")
