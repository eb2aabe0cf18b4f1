"""Devices, written once: the GPU when present unless the user names one, a clear error (not a CUDA
traceback) when a named GPU is not there, and a device as a value (``Device``) that says what it is, so
no caller reads a device's name to learn its kind."""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from ifqa.errors import IfqaError

if TYPE_CHECKING:
    from ifqa.launch import World


class Device(str):
    """A device as torch names it ("cpu", "cuda", "cuda:1", "mps"), with what the code around a model
    asks of it: its kind, its index, the device type autocast takes, whether it runs bf16 natively. A
    ``str``, so torch takes it wherever it takes a device's name."""

    def __new__(cls, name: str) -> Device:
        device = super().__new__(cls, name)
        kind, _, index = str(name).partition(":")
        device.kind, device.index = kind, int(index) if index.isdigit() else None
        return device

    @classmethod
    def of(cls, device: str | Device) -> Device:
        return device if isinstance(device, Device) else cls(str(device))

    @property
    def is_cuda(self) -> bool:
        return self.kind == "cuda"

    @property
    def autocast_type(self) -> str:
        """What ``torch.autocast`` takes for this device (its kind)."""
        return self.kind

    @functools.cached_property
    def native_bf16(self) -> bool:
        return bf16_supported(self)


def is_cuda(device: str | None) -> bool:
    """Whether ``device`` (a ``Device`` or a device's name) is a CUDA GPU."""
    return bool(device) and Device.of(device).is_cuda


def pick_device(requested: str | None = None, world: World | None = None) -> Device:
    """``requested`` checked against this machine (cpu, cuda, cuda:N, mps), else the GPU when present;
    under a launcher (``world``), this rank's: its local rank among the GPUs *it* sees (``cuda:0`` where
    each task has its own, ``srun --gpus-per-task=1``), else the CPU. A launch that mixes GPU and CPU
    ranks, or a ``--device`` that contradicts it, is one line (docs/readers.md, "Devices")."""
    import re

    import torch

    if world is not None and world.active:
        return _rank_device(requested, world)
    if not requested:
        return Device("cuda" if torch.cuda.is_available() else "cpu")
    if not re.fullmatch(r"cpu|mps|cuda(:\d+)?", requested):
        raise IfqaError(f"--device {requested!r}: use cpu, cuda or cuda:N")
    device = Device(requested)
    if device.is_cuda:
        if not torch.cuda.is_available():
            raise IfqaError(f"--device {requested}: no CUDA device is available here (use --device cpu)")
        if device.index is not None and device.index >= torch.cuda.device_count():
            raise IfqaError(f"--device {requested}: this machine has {torch.cuda.device_count()} CUDA device(s)")
    if device.kind == "mps" and not (getattr(torch.backends, "mps", None) and torch.backends.mps.is_available()):
        raise IfqaError("--device mps: no Apple GPU (MPS) is available here (use --device cpu)")
    return device


def _rank_device(requested: str | None, world: World) -> Device:
    """The device of one rank of a launched world (``pick_device``)."""
    import re

    import torch

    if requested and not re.fullmatch(r"cpu|cuda(:\d+)?", requested):
        raise IfqaError(f"--device {requested!r}: ranks train on cpu or cuda")
    gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if requested == "cpu" and gpus:
        raise IfqaError(
            f"--device cpu, but the launcher gave rank {world.rank} a GPU; leave out --device, or hide "
            "the GPUs (CUDA_VISIBLE_DEVICES=) to train on CPUs"
        )
    if not gpus:
        if requested and is_cuda(requested):
            raise IfqaError(f"--device {requested}: rank {world.rank} sees no GPU")
        return Device("cpu")
    local_size = world.local_size or world.local_rank + 1
    if world.gpus_per_task:  # the GPUs this task sees are its own
        index = 0
    elif local_size <= gpus:
        index = world.local_rank
    else:
        raise IfqaError(
            f"{local_size} ranks on this node share {gpus} visible GPU(s): rank {world.rank} would have none "
            "(NCCL cannot form a group across GPUs and CPUs); start at most one rank per GPU, give each task "
            "its own (srun --gpus-per-task=1), or hide the GPUs (CUDA_VISIBLE_DEVICES=) to train on CPUs"
        )
    return Device(f"cuda:{index}")


def cpu_threads() -> int:
    """The threads a CPU job may use: ``OMP_NUM_THREADS`` when set (a scheduler's or the user's share
    of a shared machine, as torch reads it), else every core."""
    import os

    value = os.environ.get("OMP_NUM_THREADS", "")
    return int(value) if value.isdigit() and int(value) > 0 else os.cpu_count() or 1


def gpu_index(device: str) -> int:
    """The CUDA device index ``device`` names (``cuda`` is this thread's current device)."""
    import torch

    index = torch.device(device).index
    return index if index is not None else torch.cuda.current_device()


@contextlib.contextmanager
def entered(device: str) -> Iterator[None]:
    """``device`` made the current CUDA device for the block (a no-op elsewhere): what torch places on
    "the current device" (an event recorded without a stream, a DataLoader's pinning thread, the
    allocator's cache, an RNG state) then follows the device the work runs on, not GPU 0."""
    if not is_cuda(device):
        yield
        return
    import torch

    with torch.cuda.device(gpu_index(device)):
        yield


def cpu_bf16_features() -> list[str]:
    """This CPU's native bf16 instructions (AMX, AVX-512 BF16), as /proc/cpuinfo names them."""
    try:
        flags = set(Path("/proc/cpuinfo").read_text().split())
    except OSError:
        return []
    return [name for name in ("amx_bf16", "avx512_bf16") if name in flags]


def bf16_supported(device: str) -> bool:
    """Whether ``device`` runs bf16 natively: a GPU of compute capability 8.0 or later (or ROCm), or a
    CPU with AMX or AVX-512 BF16. Emulated bf16 (V100, T4) is not support: it runs slower than fp32."""
    import torch

    if Device.of(device).is_cuda:
        if not torch.cuda.is_available():
            return False
        return bool(torch.version.hip) or torch.cuda.get_device_properties(gpu_index(device)).major >= 8
    return bool(cpu_bf16_features())


PRECISIONS = ("auto", "fp32", "fp16", "bf16")
#: what ``auto`` means for each kind of work on a GPU: encoders fp16 (within 1e-3 cosine of fp32),
#: rerankers bf16 where native else fp16, training bf16 autocast where native else fp32 (fp16 training
#: needs loss scaling). On a CPU ``auto`` is always fp32, so that figures are the same on every CPU.
GPU_DEFAULTS = {"encode": ("fp16", "fp16"), "rerank": ("bf16", "fp16"), "train": ("bf16", "fp32")}


def pick_precision(requested: str | None, device: str, work: str = "encode") -> str:
    """The precision of ``work`` (encode, rerank, train) on ``device``: ``auto`` as ``GPU_DEFAULTS``
    says; a precision the device cannot run is one line, before any work."""
    requested, on_gpu = requested or "auto", Device.of(device).is_cuda
    if requested not in PRECISIONS:
        raise IfqaError(f"--precision {requested!r}: choose from {', '.join(PRECISIONS)}")
    if requested == "auto":
        if not on_gpu:
            return "fp32"
        native, otherwise = GPU_DEFAULTS[work]
        return native if native != "bf16" or bf16_supported(device) else otherwise
    if requested == "fp16" and not on_gpu:
        raise IfqaError("--precision fp16 needs a CUDA device (a CPU runs fp16 slower than fp32); use fp32 or auto")
    if requested == "fp16" and work == "train":
        raise IfqaError("--precision fp16: training takes bf16 (no loss scaling needed) or fp32")
    if requested == "bf16" and not bf16_supported(device):
        raise IfqaError(
            f"--precision bf16: {device} has no native bf16 (a GPU needs compute capability 8.0, a CPU "
            "AMX or AVX-512 BF16); use fp32 or auto"
        )
    return requested


def numerics(device: str, precision: str) -> dict:
    """What decided a run's last digits, for its record: the device, the precision, and on a CPU the
    instruction set torch's kernels run (AVX2, AVX512) and its native bf16 instructions; on a GPU its
    name and compute capability. Two machines' different figures explain themselves from it."""
    import torch

    device = Device.of(device)
    record: dict = {"device": str(device), "precision": precision}
    if device.is_cuda and torch.cuda.is_available():
        properties = torch.cuda.get_device_properties(gpu_index(device))
        record.update(gpu=properties.name, capability=f"{properties.major}.{properties.minor}")
    elif device.kind == "cpu":
        record.update(cpu_capability=torch.backends.cpu.get_cpu_capability(), cpu_bf16=cpu_bf16_features())
    return record


def search_precision(recorded: str | None, device: str) -> str:
    """The precision questions are encoded in when searching an index whose passages were encoded in
    ``recorded``: the same where ``device`` runs it, else fp32 (never fp16 for an index built in bf16
    or fp32, whose encoder may overflow in fp16; an index that records none is searched in fp32)."""
    if recorded in (None, "fp32"):
        return "fp32"
    try:
        return pick_precision(recorded, device)
    except IfqaError:
        return "fp32"


def torch_dtype(precision: str):
    import torch

    return {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}[precision]


def compile_unavailable(device: str) -> str | None:
    """Why ``torch.compile`` cannot run on ``device`` here, or None when it can. What the inductor
    backend needs (Triton, a C compiler Triton finds and the Python headers on CUDA; a C++ compiler on
    a CPU) is looked for first, then something tiny is compiled and run on the device, once per
    process: a missing piece found only at the first compiled training step would fail after the
    model has loaded, with a long traceback."""
    import os
    import shutil
    import sysconfig

    kind = Device.of(device).kind
    if kind == "cuda":
        try:
            from torch.utils._triton import has_triton
        except ImportError:
            return "this torch has no Triton support"
        if not has_triton():
            return "Triton is not installed"
        # Triton builds its launcher with $CC, else gcc or clang (a plain cc is not looked for)
        if not any(name and shutil.which(name) for name in (os.environ.get("CC"), "gcc", "clang")):
            return "no C compiler for Triton (gcc or clang on the PATH, or $CC)"
        if not (Path(sysconfig.get_paths()["include"]) / "Python.h").is_file():
            return "no Python headers (Python.h) for Triton's launcher; install python3-dev"
    elif kind != "cpu":
        return f"ifqa compiles on CUDA and CPUs only, not {device}"
    elif not any(shutil.which(name) for name in ("g++", "c++", "clang++")):
        return "no C++ compiler (g++) found"
    return _compile_probe(device)


@functools.cache
def _compile_probe(device: str) -> str | None:
    """Compile and run a tiny function with inductor on ``device``: None when it works, else why not."""
    import torch

    try:
        tiny = torch.compile(lambda x: torch.relu(x) * 2 + 1, backend="inductor", fullgraph=True, dynamic=False)
        result = tiny(torch.ones(8, device=device))
        if float(result.sum()) != 24.0:
            return "a test compile computed a wrong result"
    except Exception as exc:  # noqa: BLE001 - whatever stops inductor is the reason to train eagerly
        lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
        return f"a test compile failed: {type(exc).__name__}: {lines[0][:200] if lines else ''}".rstrip(": ")
    return None
