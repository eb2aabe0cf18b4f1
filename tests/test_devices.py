"""Device and precision choices, on GPUs a fake CUDA (tests/fake_cuda.py) stands for: native bf16 only,
reduced precision by default on a GPU and fp32 on every CPU, the current device entered for a block."""

import pytest

from ifqa import devices
from ifqa.errors import IfqaError
from tests.fake_cuda import FakeCuda


@pytest.mark.parametrize("features", [[], ["avx512_bf16"], ["amx_bf16", "avx512_bf16"]])
@pytest.mark.parametrize("work", ["encode", "rerank", "train"])
def test_auto_is_fp32_on_every_cpu_and_bf16_only_when_asked(monkeypatch, features, work):
    """The same figures on every CPU: its bf16 instructions decide nothing unless bf16 is asked for."""
    monkeypatch.setattr(devices, "cpu_bf16_features", lambda: features)
    assert devices.pick_precision("auto", "cpu", work) == "fp32"
    if features:
        assert devices.pick_precision("bf16", "cpu", work) == "bf16"
    else:
        with pytest.raises(IfqaError, match="--precision bf16: cpu has no native bf16"):
            devices.pick_precision("bf16", "cpu", work)


@pytest.mark.parametrize(
    "major, work, expected",
    [
        (8, "encode", "fp16"),
        (8, "rerank", "bf16"),
        (8, "train", "bf16"),
        (7, "encode", "fp16"),  # V100, T4: bf16 is emulated, slower than fp32
        (7, "rerank", "fp16"),
        (7, "train", "fp32"),
    ],
)
def test_auto_on_a_gpu_takes_bf16_only_where_it_is_native(monkeypatch, major, work, expected):
    FakeCuda(count=2, major=major).install(monkeypatch)
    assert devices.bf16_supported("cuda:1") is (major >= 8)
    assert devices.pick_precision("auto", "cuda:1", work) == expected
    if major < 8:
        with pytest.raises(IfqaError, match="no native bf16"):
            devices.pick_precision("bf16", "cuda:1", work)


def test_training_refuses_fp16_and_unknown_precisions(monkeypatch):
    FakeCuda().install(monkeypatch)
    with pytest.raises(IfqaError, match="training takes bf16"):
        devices.pick_precision("fp16", "cuda", "train")
    with pytest.raises(IfqaError, match="choose from"):
        devices.pick_precision("fp8", "cuda")


def test_entered_makes_the_device_current_for_the_block_only(monkeypatch):
    cuda = FakeCuda(count=4).install(monkeypatch)
    with devices.entered("cuda:3"):
        assert cuda.current == 3
    assert cuda.current == 0 and cuda.entered == [3]
    with devices.entered("cpu"):
        pass
    assert cuda.entered == [3]


def test_a_run_records_what_decided_its_last_digits(monkeypatch):
    import torch

    record = devices.numerics("cpu", "fp32")
    assert record["cpu_capability"] == torch.backends.cpu.get_cpu_capability()
    assert record["cpu_bf16"] == devices.cpu_bf16_features() and record["precision"] == "fp32"
    FakeCuda(major=9).install(monkeypatch)
    assert devices.numerics("cuda:1", "bf16") == {
        "device": "cuda:1",
        "precision": "bf16",
        "gpu": "Fake GPU 1",
        "capability": "9.0",
    }


def test_every_device_option_is_one_line_before_anything_is_written(cli, monkeypatch, tmp_path):
    """Every command's --device (walked) refuses what this machine cannot run as it is parsed: a GPU
    index past its GPUs, cuda without CUDA, a name that is no device, an index that is no number."""
    from ifqa.cli import cli as root
    from ifqa.cli.help import leaf_commands

    commands = [
        name.split()[1:] for name, command in leaf_commands(root) if any(p.name == "device" for p in command.params)
    ]
    assert {"rerank", "index", "train", "read", "serve", "retrieve"} <= {path[0] for path in commands}
    cases = {"cuda": "no CUDA device", "gpu": "use cpu, cuda or cuda:N", "cuda:x": "use cpu, cuda or cuda:N"}
    for path in commands:
        for value, said in cases.items():
            result = cli(*path, "--device", value, cwd=tmp_path)
            line = result.stderr.strip()
            assert result.returncode == 1 and "\n" not in line and "--device" in line and said in line, (path, line)
    FakeCuda(count=1).install(monkeypatch)
    for path in commands:
        result = cli(*path, "--device", "cuda:7", cwd=tmp_path)
        assert result.returncode == 1 and "this machine has 1 CUDA device" in result.stderr, (path, result.stderr)
    assert list(tmp_path.iterdir()) == []
