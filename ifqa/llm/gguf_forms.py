"""The GGUF forms of a reader ``ifqa train llm`` made, so that llama.cpp reads it: a LoRA adapter that
llama.cpp applies to the base file it was trained on, or the whole model converted. Both are written with
the gguf package's writer from the base file's own metadata and tensor names (the package's name map), and
checked against the base they are applied to before a read: its architecture, its tensor shapes and the
digest of its bytes. ``--backend hf`` merges the same adapter file into the dequantized base, so both
backends read one set of weights.

llama.cpp keeps a llama model's query and key rows in the order its rotary embedding pairs them
(interleaved), where transformers pairs the two halves of each head; transformers' GGUF loader undoes
that order when it loads the base, so an adapter's B rows (and a converted model's weights) are put in
llama.cpp's order here, and taken back out of it for ``--backend hf``.
"""

from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path

from ifqa.errors import IfqaError
from ifqa.io import umask_modes, write_json
from ifqa.llm.local_models import file_digest, working_copy
from ifqa.paths import cache_dir

ADAPTER = "adapter.gguf"  # a trained folder's LoRA adapter, in llama.cpp's adapter format
MODEL = "model.gguf"  # a trained folder's whole model, converted
#: the metadata key of the adapter's base: the xxh3-128 digest of the base file's bytes
BASE_DIGEST = "ifqa.base_digest"
#: the architectures an adapter or a converted model is written for (the one tested: SmolLM2's), and
#: whether their query/key rows are stored interleaved (see the module)
ARCHITECTURES = {"llama": True}
WRITTEN_TYPE = "F16"


def _reader(path: Path, what: str):
    """The gguf package's reader of ``path``, or one line: a file that is not whole GGUF is damaged."""
    import gguf

    try:
        return gguf.GGUFReader(str(path))
    except (ValueError, OSError, KeyError, IndexError) as exc:
        raise IfqaError(
            f"a damaged {what}: not a whole GGUF file ({str(exc)[:100] or type(exc).__name__})", path
        ) from None


def _field(reader, key: str, default=None):
    field = reader.fields.get(key)
    return default if field is None else field.contents()


def _heads(reader, arch: str) -> tuple[int, int]:
    heads = int(_field(reader, f"{arch}.attention.head_count"))
    return heads, int(_field(reader, f"{arch}.attention.head_count_kv", heads))


def interleave(rows, heads: int):
    """A query or key weight's rows (transformers' order: each head's two halves) in llama.cpp's order
    (each head's pairs interleaved)."""
    per = rows.shape[0] // heads // 2
    return rows.reshape(heads, 2, per, *rows.shape[1:]).swapaxes(1, 2).reshape(rows.shape)


def deinterleave(rows, heads: int):
    """``interleave`` undone."""
    per = rows.shape[0] // heads // 2
    return rows.reshape(heads, per, 2, *rows.shape[1:]).swapaxes(1, 2).reshape(rows.shape)


def _reordered(name: str, rows, arch: str, heads: tuple[int, int], back: bool = False):
    """``rows`` of the GGUF tensor ``name`` in llama.cpp's order (``back``: in transformers')."""
    if not ARCHITECTURES[arch] or not (".attn_q." in name or ".attn_k." in name):
        return rows
    count = heads[0] if ".attn_q." in name else heads[1]
    return (deinterleave if back else interleave)(rows, count)


def _named_architecture(reader) -> str:
    return str(_field(reader, "general.architecture", ""))


def _architecture(arch: str, path: Path) -> str:
    if arch not in ARCHITECTURES:
        raise IfqaError(
            f"is a {arch or 'unnamed'} model; LoRA adapters in GGUF are written for {', '.join(ARCHITECTURES)} "
            "models (the architecture they are tested on)",
            path,
        )
    return arch


FACTS = ("architecture", "blocks", "heads", "shapes")


def base_facts(base: Path) -> dict:
    """What an adapter needs of its base file: its architecture, block and head counts, and every tensor's
    shape. The gguf package's reader parses every metadata array (SmolLM2's 49,152-token vocabulary and
    merges: 6 s on a Zen 1 core, paid by each read with an adapter), so they are read once per base file and
    kept in ifqa's cache under the digest of its bytes (a changed file is another key)."""
    path = cache_dir() / "gguf" / f"{file_digest(base)}.facts.json"
    with contextlib.suppress(OSError, ValueError):
        kept = json.loads(path.read_text(encoding="utf-8"))
        if isinstance(kept, dict) and set(kept) == set(FACTS):
            return kept
    reader = _reader(base, "base model")
    arch = _named_architecture(reader)
    known = arch in ARCHITECTURES
    facts = {
        "architecture": arch,
        "blocks": int(_field(reader, f"{arch}.block_count")) if known else None,
        "heads": list(_heads(reader, arch)) if known else None,
        "shapes": {t.name: [int(n) for n in t.shape] for t in reader.tensors},
    }
    with contextlib.suppress(OSError):  # kept for the next read; this one has them either way
        path.parent.mkdir(parents=True, exist_ok=True)
        write_json(path, facts)
    return facts


def check_base(base: Path) -> None:
    """A GGUF base an adapter can be written for (refused before training, not at its first save)."""
    _architecture(base_facts(base)["architecture"], base)


def _names(arch: str, blocks: int):
    import gguf

    arches = {name: key for key, name in gguf.MODEL_ARCH_NAMES.items()}
    return gguf.get_tensor_name_map(arches[arch], blocks)


def gguf_name(names, module: str) -> str | None:
    """The GGUF tensor name of a transformers linear layer's weight (``model.layers.0.self_attn.q_proj``)."""
    found = names.get_name(module)
    return None if found is None else f"{found}.weight"


def _written(path: Path, write) -> None:
    """``write(partial)``'s file moved into place whole (a kill leaves no half file under the name)."""
    partial = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        write(partial)
        umask_modes(partial)
        os.replace(partial, path)
    finally:
        with contextlib.suppress(OSError):
            partial.unlink(missing_ok=True)


def write_adapter(target: Path, base: Path, base_digest: str, alpha: float, pairs: dict) -> None:
    """A LoRA adapter for ``base`` as llama.cpp reads it: ``pairs`` maps a transformers linear layer's
    name to its (A: rank x inputs, B: outputs x rank) factors, the update being alpha / rank x B A."""
    import gguf
    import numpy as np

    facts = base_facts(base)
    arch = _architecture(facts["architecture"], base)
    heads, names = tuple(facts["heads"]), _names(arch, facts["blocks"])
    tensors = []
    for module, (a, b) in sorted(pairs.items()):
        name = gguf_name(names, module)
        if name is None:
            raise IfqaError(f"no GGUF tensor for the adapted layer {module}", base)
        b = _reordered(name, np.asarray(b, dtype=np.float32), arch, heads)
        tensors += [(f"{name}.lora_a", np.asarray(a, dtype=np.float16)), (f"{name}.lora_b", b.astype(np.float16))]

    def write(partial: Path) -> None:
        writer = gguf.GGUFWriter(str(partial), arch)
        writer.add_type(gguf.GGUFType.ADAPTER)
        writer.add_string(gguf.Keys.Adapter.TYPE, "lora")
        writer.add_float32(gguf.Keys.Adapter.LORA_ALPHA, float(alpha))
        writer.add_string(BASE_DIGEST, base_digest)
        for name, values in tensors:
            writer.add_tensor(name, values)
        writer.write_header_to_file()
        writer.write_kv_data_to_file()
        writer.write_tensors_to_file()
        writer.close()

    _written(target, write)


def write_model(target: Path, base: Path, weights: dict) -> None:
    """A whole model as llama.cpp reads it (``_write_like``), each tensor taken from ``weights`` (a
    transformers state dict of the base's architecture, fine-tuned); the base's tensors the state dict lacks
    are refused."""
    reader = _reader(base, "base model")  # whole: its metadata is copied
    arch = _architecture(_named_architecture(reader), base)
    heads, names = _heads(reader, arch), _names(arch, int(_field(reader, f"{arch}.block_count")))
    by_gguf = {names.get_name(key, try_suffixes=(".weight", ".bias")): key for key in weights}
    missing = [t.name for t in reader.tensors if t.name not in by_gguf]
    if missing:
        raise IfqaError(f"the trained weights lack {len(missing)} of the base's tensors ({missing[0]} ...)", base)

    def values(tensor):
        return _reordered(tensor.name, weights[by_gguf[tensor.name]].detach().float().cpu().numpy(), arch, heads)

    _write_like(target, reader, arch, values)


def write_merged(target: Path, base: Path, adapter: Path) -> None:
    """The base with a LoRA adapter's updates added (alpha / rank x B A, in float32, where llama.cpp would add
    them to every product it computes), written as a whole model (``_write_like``): llama.cpp then reads
    the trained reader at its base's pace (benchmarks/llamacpp_reader.py). The caller has checked both files
    (``TrainedReader.checked_adapter``: every factor fits a weight of this base)."""
    import gguf
    import numpy as np

    reader, lora = _reader(base, "base model"), _reader(adapter, "LoRA adapter")
    arch = _architecture(_named_architecture(reader), base)
    alpha = float(_field(lora, "adapter.lora.alpha", 0.0))
    factors = {t.name: np.asarray(t.data, dtype=np.float32) for t in lora.tensors}

    def values(tensor):
        weight = gguf.quants.dequantize(tensor.data, tensor.tensor_type).astype(np.float32)
        weight = weight.reshape([int(n) for n in reversed(tensor.shape)])
        a, b = factors.get(f"{tensor.name}.lora_a"), factors.get(f"{tensor.name}.lora_b")
        return weight if a is None else weight + (alpha / a.shape[0] if alpha else 1.0) * (b @ a)

    _write_like(target, reader, arch, values)


def merged_copy(base: Path, adapter: Path) -> Path:
    """``write_merged``'s file in the ifqa cache (``local_models.working_copy``), named by both files' bytes."""
    name = f"{base.stem}-{file_digest(base)[:16]}-lora-{file_digest(adapter)[:16]}-f16.gguf"
    hint = "or apply the adapter at every product: --gguf-weights file"
    return working_copy(name, adapter, "merged F16 copy", lambda partial: write_merged(partial, base, adapter), hint)


def _write_like(target: Path, reader, arch: str, values) -> None:
    """A whole model as llama.cpp reads it, in float16 (vectors in float32): ``reader``'s metadata (its
    tokenizer and chat template included) and tensor names, each tensor's ``values(tensor)`` (float32, in
    llama.cpp's order)."""
    import gguf
    import numpy as np

    def write(partial: Path) -> None:
        writer = gguf.GGUFWriter(str(partial), arch)
        for key, field in reader.fields.items():
            if key.startswith("GGUF.") or key in ("general.architecture", "general.file_type"):
                continue
            sub_type = field.types[1] if field.types[0] == gguf.GGUFValueType.ARRAY else None
            writer.add_key_value(key, field.contents(), field.types[0], sub_type)
        writer.add_file_type(gguf.LlamaFileType.MOSTLY_F16)
        for tensor in reader.tensors:
            found = values(tensor)
            writer.add_tensor(tensor.name, found.astype(np.float16 if found.ndim == 2 else np.float32))
        writer.write_header_to_file()
        writer.write_kv_data_to_file()
        writer.write_tensors_to_file()
        writer.close()

    _written(target, write)


def check_adapter(adapter: Path, base: Path, base_digest: str) -> None:
    """``adapter`` is a whole LoRA adapter made for ``base`` (whose bytes digest to ``base_digest``): its
    kind, architecture, recorded base and every tensor's shape; anything else is one line naming it."""
    reader = _reader(adapter, "LoRA adapter")
    if _field(reader, "general.type") != "adapter" or _field(reader, "adapter.type") != "lora":
        raise IfqaError("is not a LoRA adapter (general.type adapter, adapter.type lora)", adapter)
    facts = base_facts(base)
    mine, theirs = _field(reader, "general.architecture"), facts["architecture"]
    if mine != theirs:
        raise IfqaError(f"is an adapter for a {mine} model, and its base {base} is a {theirs} model", adapter)
    recorded = _field(reader, BASE_DIGEST)
    if recorded != base_digest:
        raise IfqaError(
            f"was trained on a base file whose bytes digest to {recorded}, and {base} digests to {base_digest}: "
            "apply it to the file it was trained on",
            adapter,
        )
    shapes = {name: tuple(shape) for name, shape in facts["shapes"].items()}
    for tensor in reader.tensors:
        weight, _, part = tensor.name.rpartition(".lora_")
        shape = tuple(int(n) for n in tensor.shape)  # ggml's order: inputs first
        known = shapes.get(weight)
        fits = known is not None and (shape[0] == known[0] if part == "a" else shape[1] == known[1])
        if part not in ("a", "b") or not fits:
            raise IfqaError(f"its tensor {tensor.name} {list(shape)} fits no weight of {base.name}", adapter)


def merge_adapter(model, adapter: Path) -> int:
    """The adapter's updates added to a transformers model of its base (``--backend hf``: the base GGUF
    file dequantized); returns how many weights it changed."""
    import torch

    reader = _reader(adapter, "LoRA adapter")
    arch = _architecture(_named_architecture(reader), adapter)
    config = model.config
    heads = (config.num_attention_heads, getattr(config, "num_key_value_heads", None) or config.num_attention_heads)
    names = _names(arch, config.num_hidden_layers)
    alpha = float(_field(reader, "adapter.lora.alpha", 0.0))
    factors = {t.name: torch.from_numpy(t.data.astype("float32")) for t in reader.tensors}
    changed = 0
    with torch.no_grad():
        for module_name, module in model.named_modules():
            name = gguf_name(names, module_name) if isinstance(module, torch.nn.Linear) else None
            if name is None or f"{name}.lora_a" not in factors:
                continue
            a, b = factors[f"{name}.lora_a"], factors[f"{name}.lora_b"]
            b = torch.from_numpy(_reordered(name, b.numpy(), arch, heads, back=True).copy())
            scale = alpha / a.shape[0] if alpha else 1.0
            module.weight.copy_(module.weight.float() + scale * (b @ a))  # summed in float32, then the model's dtype
            changed += 1
    if changed * 2 != len(factors):
        raise IfqaError(f"{len(factors) // 2 - changed} of its weights are not in the model it is applied to", adapter)
    return changed
