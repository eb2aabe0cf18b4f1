import json
import os

import pytest

from ifqa.datasets.demo import load_demo
from ifqa.llm.hf_backend import HFBackend
from ifqa.llm.protocol import GenerationParams
from tests.readers.tiny_models import tiny_llama


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    return tiny_llama(tmp_path_factory.mktemp("llama"))


def test_batched_generation_equals_one_at_a_time(model_dir):
    """In float32 (pinned: bfloat16, the default on an AMX CPU, rounds left-padded rows differently)."""
    prompts = [e.question for e in load_demo("dev")[:5]]
    params = GenerationParams(max_tokens=6)
    batched = HFBackend(str(model_dir), "cpu", batch_size=5, dtype="float32").complete(prompts, params)
    single = HFBackend(str(model_dir), "cpu", batch_size=1, dtype="float32").complete(prompts, params)
    assert [c.text for c in batched] == [c.text for c in single]
    assert all(c.completion_tokens <= 6 and c.prompt_tokens > 5 for c in batched)


@pytest.mark.parametrize("amx", [True, False])
def test_the_precision_is_bfloat16_on_a_cpu_with_amx_else_float32_and_keys_the_cache(model_dir, monkeypatch, amx):
    import torch

    from ifqa.llm.protocol import BackendOptions

    monkeypatch.setattr(torch.cpu, "_is_amx_tile_supported", lambda: amx, raising=False)
    auto = HFBackend.from_options(str(model_dir), BackendOptions(device="cpu"))
    assert auto.describe()["weights"] == ("bfloat16" if amx else "float32")
    asked = HFBackend.from_options(str(model_dir), BackendOptions(device="cpu", dtype="float32"))
    assert asked.describe()["weights"] == "float32"


def test_chat_template_is_applied(tmp_path):
    backend = HFBackend(str(tiny_llama(tmp_path / "chat", chat=True)), "cpu")
    assert backend.chat and backend.format_prompt("hi", GenerationParams()).startswith("<s>hi</s>")


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
