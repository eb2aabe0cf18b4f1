import json
import os

import pytest

from ifqa.datasets.demo import load_demo
from ifqa.llm.backends import GenerationParams, HFBackend
from tests.readers.tiny_models import tiny_llama


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    return tiny_llama(tmp_path_factory.mktemp("llama"))


def test_batched_generation_equals_one_at_a_time(model_dir):
    prompts = [e.question for e in load_demo("dev")[:5]]
    params = GenerationParams(max_tokens=6)
    batched = HFBackend(str(model_dir), "cpu", batch_size=5).complete(prompts, params)
    single = HFBackend(str(model_dir), "cpu", batch_size=1).complete(prompts, params)
    assert [c.text for c in batched] == [c.text for c in single]
    assert all(c.completion_tokens <= 6 and c.prompt_tokens > 5 for c in batched)


def test_chat_template_is_applied(tmp_path):
    backend = HFBackend(str(tiny_llama(tmp_path / "chat", chat=True)), "cpu")
    assert backend.chat and backend._format("hi", GenerationParams()).startswith("<s>hi</s>")


def test_cli_reads_with_a_local_model(cli, model_dir, tmp_path):
    env = {**os.environ, "IFQA_CACHE_DIR": str(tmp_path / "cache")}
    out = tmp_path / "hf.jsonl"
    result = cli(
        "read",
        "--reader",
        "llm",
        "--backend",
        "hf",
        "--model",
        model_dir,
        "--mode",
        "cot",
        "--demos",
        "2",
        "--max-tokens",
        "8",
        "--batch-size",
        "8",
        "-o",
        out,
        "--no-progress",
        env=env,
    )
    assert result.returncode == 0, result.stderr
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(records) == 24 and all(isinstance(r["prediction"], str) and "raw" in r for r in records)
    manifest = json.loads((tmp_path / "hf.jsonl.manifest.json").read_text())
    assert manifest["backend"]["backend"] == "hf" and manifest["counters"]["requests"] == 24
