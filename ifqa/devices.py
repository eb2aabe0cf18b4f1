"""Device selection, written once: the GPU when present unless the user names one, and a clear
error (not a CUDA traceback) when a named GPU is not there."""

from __future__ import annotations

from ifqa.errors import IfqaError


def pick_device(requested: str | None = None) -> str:
    import torch

    if not requested:
        return "cuda" if torch.cuda.is_available() else "cpu"
    if requested.startswith("cuda") and not torch.cuda.is_available():
        raise IfqaError(f"--device {requested}: no CUDA device is available here (use --device cpu)")
    if not (requested == "cpu" or requested.startswith(("cuda", "mps"))):
        raise IfqaError(f"--device {requested!r}: use cpu, cuda or cuda:N")
    return requested


def bf16_supported(device: str) -> bool:
    """bf16 autocast pays off on GPUs and on CPUs with AMX or AVX-512 BF16 (2-3x here); else fp32."""
    import torch

    if device.startswith("cuda"):
        return torch.cuda.is_bf16_supported()
    try:
        from pathlib import Path

        flags = Path("/proc/cpuinfo").read_text()
    except OSError:
        return False
    return "amx_bf16" in flags or "avx512_bf16" in flags
