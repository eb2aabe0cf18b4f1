"""The vLLM backend: a clear one-line refusal where it cannot run, and on a CUDA machine with vLLM
the same reading job as the hf backend (same questions, prompts, cache and files)."""

import importlib.util
import json
import os

import pytest

from tests.readers.tiny_models import tiny_llama


def _cuda() -> bool:
    try:
        import torch

        return torch.cuda.is_available()
    except ImportError:
        return False


@pytest.mark.skipif(_cuda() and importlib.util.find_spec("vllm") is not None, reason="vLLM can run here")
def test_without_vllm_or_a_gpu_the_error_is_one_line(cli, tmp_path):
    env = {**os.environ, "IFQA_CACHE_DIR": str(tmp_path / "cache")}
    result = cli("read", "llm", "--backend", "vllm", "--model", "some/model", "-o", tmp_path / "p.jsonl", env=env)
    assert result.returncode == 1 and result.stderr.count("\n") == 1 and not (tmp_path / "p.jsonl").exists()
    expected = (
        "needs a CUDA GPU"
        if importlib.util.find_spec("vllm")
        else "this needs vllm, which is not installed: pip install 'ifqa[vllm]'"
    )
    assert expected in result.stderr


@pytest.mark.gpu
@pytest.mark.skipif(not _cuda(), reason="needs CUDA")
def test_vllm_reads_like_the_hf_backend(cli, tmp_path):
    pytest.importorskip("vllm")
    model = tiny_llama(tmp_path / "llama")
    env = {**os.environ, "IFQA_CACHE_DIR": str(tmp_path / "cache")}
    files = {}
    for backend in ("vllm", "hf"):
        out = tmp_path / f"{backend}.jsonl"
        result = cli(
            "read",
            "llm",
            "--backend",
            backend,
            "--model",
            model,
            "--demos",
            "2",
            "--max-tokens",
            "8",
            "-o",
            out,
            "--no-progress",
            env=env,
            timeout=900,
        )
        assert result.returncode == 0, result.stderr
        files[backend] = [json.loads(line) for line in out.read_text().splitlines()]
        manifest = json.loads((tmp_path / f"{backend}.jsonl.manifest.json").read_text())
        assert manifest["backend"]["backend"] == backend and manifest["counters"]["requests"] == 24
    assert [r["qid"] for r in files["vllm"]] == [r["qid"] for r in files["hf"]]
    assert [r["prompt_tokens"] for r in files["vllm"]] == [r["prompt_tokens"] for r in files["hf"]]  # same prompts
    again = cli(
        "read",
        "llm",
        "--backend",
        "vllm",
        "--model",
        model,
        "--demos",
        "2",
        "--max-tokens",
        "8",
        "-o",
        tmp_path / "again.jsonl",
        "--no-progress",
        env=env,
        timeout=900,
    )
    assert again.returncode == 0, again.stderr
    assert json.loads((tmp_path / "again.jsonl.manifest.json").read_text())["counters"]["requests"] == 0  # all cached
