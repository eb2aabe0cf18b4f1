"""The fake CUDA (tests/fake_cuda.py) is as strict as torch, covers every ``torch.cuda`` call in ifqa/,
and under it the training commands on a GPU machine's default device reach the device: the CPU tests
then fail where a GPU would (the crash the first real GPU found: ``torch.cuda.set_device("cuda")``)."""

import ast
import os
from pathlib import Path

import pytest
import torch

from tests.fake_cuda import COVERED, FakeCuda
from tests.readers import test_fid
from tests.training.test_reranker import TRAIN

toy_run = test_fid.toy_run  # the toy FiD run fixture, shared
IFQA = Path(__file__).resolve().parents[1] / "ifqa"
NOT_COMPILED = "Torch not compiled with CUDA enabled"


def test_the_fake_refuses_what_torch_refuses(monkeypatch):
    with pytest.raises(ValueError) as real:
        torch.cuda._utils._get_device_index("cuda")  # what torch.cuda.set_device("cuda") raises on a GPU
    cuda = FakeCuda(count=2).install(monkeypatch)
    with pytest.raises(ValueError) as faked:
        torch.cuda.set_device("cuda")
    assert str(faked.value) == str(real.value)
    for bad in ("cuda:2", 7, torch.device("cuda", 5)):
        with pytest.raises(RuntimeError, match="invalid device ordinal"):
            torch.cuda.set_device(bad)
    with pytest.raises(ValueError, match="Expected a cuda device"):
        torch.cuda.set_device("cpu")
    torch.cuda.set_device("cuda:1")
    with torch.cuda.device("cuda"):  # optional where torch's is: the current device
        assert torch.cuda.current_device() == 1
    assert torch.cuda.current_stream().device == 1 and torch.cuda.get_device_properties("cuda").name == "Fake GPU 1"
    state = torch.cuda.get_rng_state("cuda")
    torch.cuda.set_rng_state(state, 0)
    assert torch.equal(cuda.rng_states[0], state)


def _cuda_calls() -> dict[str, list[str]]:
    """Every ``torch.cuda.NAME`` ifqa/ reaches for, with where."""
    found: dict[str, list[str]] = {}
    for path in sorted(IFQA.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (
                isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Attribute)
                and node.value.attr == "cuda"
                and isinstance(node.value.value, ast.Name)
                and node.value.value.id == "torch"
            ):
                found.setdefault(node.attr, []).append(f"{path.relative_to(IFQA.parent)}:{node.lineno}")
    return found


def test_the_fake_covers_every_torch_cuda_call_in_ifqa():
    calls = _cuda_calls()
    assert {"set_device", "get_rng_state", "is_available"} <= set(calls)  # the walk finds them
    assert {name: where for name, where in calls.items() if name not in COVERED} == {}


def test_training_on_a_gpu_machines_default_device_reaches_the_device(cli, monkeypatch, tmp_path, toy_run, tiny_model):
    """`ifqa train fid` and `ifqa train reranker` with no --device on a machine with GPUs: they get as
    far as moving the model to the GPU (torch's own "not compiled with CUDA" here), never a device
    index error, and the current device is set to the one they train on."""
    from tests.readers.tiny_models import tiny_t5

    cuda = FakeCuda(count=1).install(monkeypatch)
    env = {**os.environ, "IFQA_CACHE_DIR": str(tmp_path / "cache")}
    fid = cli(
        "train",
        "--reader",
        "fid",
        "--run",
        toy_run,
        "--model",
        tiny_t5(tmp_path / "t5"),
        "-o",
        tmp_path / "f",
        "--steps",
        "1",
        "--no-progress",
        env=env,
    )
    reranker = cli("train", "reranker", *TRAIN, "--model", tiny_model, "-o", tmp_path / "r", env=env)
    for result in (fid, reranker):
        assert result.returncode == 1 and NOT_COMPILED in result.stderr, result.stderr
        assert "specified index" not in result.stderr
    assert cuda.entered[:1] == [0]
