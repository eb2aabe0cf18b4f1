"""Opening a model a user names (a hub id or a local folder): a path that is not there, a folder that
holds no model, a model of the wrong kind or weights that cannot be read are one line before any
work, never a library's traceback. Model files are read as weights only: a pickle that would run
code is refused (``torch.load(weights_only=True)``, safetensors), never executed."""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import pickle
from collections.abc import Iterator
from pathlib import Path

from ifqa.errors import IfqaError, system_error_line
from ifqa.hub_reach import offline_if_unreachable

log = logging.getLogger(__name__)


def check_model_location(name: str | Path) -> None:
    """A model named by a path that does not exist is refused at once, not looked up on the hub
    (which takes 30 s offline and then fails with a hub error). Hub ids are ``name`` or ``org/name``."""
    text = str(name)
    if Path(text).expanduser().exists():
        return
    if text.startswith((".", "/", "~")) or text.count("/") >= 2 or os.sep != "/" and os.sep in text:
        raise IfqaError("no such model folder", text)


#: what a model folder holds, one of them at least
MODEL_FILES = ("config.json", "modules.json")


def check_model(name: str | Path, hint: str = "", files: tuple[str, ...] = MODEL_FILES) -> Path:
    """``check_model_location``, and a local path that holds none of ``files`` is refused too
    ("not a model folder", then ``hint``: what the option takes)."""
    check_model_location(name)
    path = Path(name)
    if path.exists() and not any((path / file).exists() for file in files):
        raise IfqaError(f"not a model folder (no {' or '.join(files)}){hint}", path)
    return path


def model_type(name: str | Path) -> str | None:
    """The ``model_type`` a local folder's config.json names (None for a hub id or no config)."""
    import json

    config = Path(name) / "config.json"
    if not config.is_file():
        return None
    try:
        value = json.loads(config.read_text(encoding="utf-8")).get("model_type")
    except (ValueError, UnicodeDecodeError, AttributeError):
        raise IfqaError("unreadable config.json", name) from None
    return value if isinstance(value, str) else None


def check_causal_lm(name: str | Path, option: str, hint: str = "") -> None:
    """A local model that is not a causal LM is refused in one line: a config whose ``model_type``
    transformers loads as no causal LM (``hint`` says where that kind goes), or an encoder (a
    sentence-transformers layout, or architectures naming no language-model head: BERT's model type
    is a causal LM too, as BertLMHeadModel)."""
    import json

    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

    kind = model_type(name)
    if kind is not None and kind not in MODEL_FOR_CAUSAL_LM_MAPPING_NAMES:
        raise IfqaError(f"{option} {name}: a {kind} model is not a causal LM{hint}")
    folder = Path(name).expanduser()
    encoder = "a sentence-transformers model" if (folder / "modules.json").is_file() else None
    try:
        architectures = json.loads((folder / "config.json").read_text(encoding="utf-8")).get("architectures") or []
    except (OSError, ValueError, AttributeError):
        architectures = []
    heads = ("ForCausalLM", "LMHeadModel", "ForConditionalGeneration")
    if architectures and not any(a.endswith(heads) for a in architectures):
        encoder = encoder or ", ".join(architectures)
    if encoder:
        raise IfqaError(f"{option} {name}: an encoder ({encoder}), not a causal LM that writes answers")


@contextlib.contextmanager
def loading(name: str | Path, what: str = "model", loads: str | Path | None = None) -> Iterator[None]:
    """Whatever a library raises while loading ``name`` becomes one line naming it. ``loads``: what is
    loaded, where ``name`` resolved to a local folder (a packaged model): the Hub is asked about only
    when that is a hub id."""
    import warnings

    hub = not Path(str(loads or name)).expanduser().exists()
    unreachable = offline_if_unreachable() if hub else None  # from the cache at once, or one line
    try:
        with warnings.catch_warnings():  # torch's note on a pickle's protocol would be a second line
            warnings.filterwarnings("ignore", message=".*pickle protocol.*")
            yield
    except (OSError, ValueError, KeyError, TypeError, AttributeError, RuntimeError, pickle.UnpicklingError) as exc:
        if type(exc).__name__ == "OutOfMemoryError":
            raise
        refusal = system_error_line(exc)
        if refusal is not None:  # the machine's (memory, disk), not the model's fault
            raise IfqaError(refusal) from None
        text = str(exc).strip()
        if isinstance(exc, pickle.UnpicklingError) or "Weights only load failed" in text:
            raise IfqaError(
                f"{what} {str(name)!r} holds a pickle that is more than plain weights; ifqa never runs "
                "code from a model file (save the model with safetensors)"
            ) from None
        detail = text.splitlines()[0][:200] if text else type(exc).__name__
        if unreachable is not None:
            detail = f"not in the local cache, and the Hub cannot be reached: {unreachable}"
        raise IfqaError(f"cannot load {what} {str(name)!r} ({detail})") from None


def library_model(
    cls,
    name: str,
    what: str,
    resolved: str | None = None,
    hint: str = "",
    files: tuple[str, ...] = MODEL_FILES,
    **kwargs,
):
    """A sentence-transformers model to train (``cls``: ``SentenceTransformer`` or ``CrossEncoder``), named
    ``name`` (``resolved``: the packaged folder it stands for, if any), on the CPU (the training loop moves
    it), ``kwargs`` its constructor's; a folder holding no model (``check_model``) or one the library cannot
    load (``loading``) is one line naming ``name``."""
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    path = check_model(resolved or name, hint, files)
    source = str(path) if path.exists() else name
    with loading(name, what, source):
        return cls(source, device="cpu", **kwargs)


def check_max_length(max_length: int | None, config, name: str, option: str = "--max-length") -> None:
    """A length past the model's position embeddings fails deep inside it: one line instead."""
    positions = getattr(config, "max_position_embeddings", None)
    if max_length and isinstance(positions, int) and max_length > positions:
        raise IfqaError(f"{option} {max_length} is more than {name} can read ({positions} positions)")


def load_weights(path: str | Path):
    """A torch file of tensors, numbers, strings and containers (``weights_only``: a crafted file
    cannot run code); what cannot be read is the caller's to name (``errors.restoring``), without
    torch's warnings about the pickle protocol of a file that is no checkpoint."""
    import warnings

    import torch

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        return torch.load(path, map_location="cpu", weights_only=True)


def pair_inputs(tokenizer, questions: list[str], texts: list[str], max_length: int | None, **options):
    """(question, passage) pairs tokenized as cross-encoders read them: the passage is cut to fit; a
    question too long for any passage is cut too, in its own pair alone (said once), never the whole
    batch, whose every pair's tokens, and so its score, would then depend on its batch-mates."""
    try:
        return tokenizer(questions, texts, truncation="only_second", max_length=max_length, **options)
    except Exception as exc:  # noqa: BLE001 - the tokenizers library raises a bare Exception here
        if "truncat" not in str(exc).lower():
            raise
    padding, tensors = options.pop("padding", False), options.pop("return_tensors", None)
    rows = []
    for question, text in zip(questions, texts):
        try:
            rows.append(tokenizer(question, text, truncation="only_second", max_length=max_length, **options))
        except Exception as exc:  # noqa: BLE001 - as above
            if "truncat" not in str(exc).lower():
                raise
            rows.append(tokenizer(question, text, truncation="longest_first", max_length=max_length, **options))
            say_once(
                f"--max-length {max_length} leaves no room for the passage after some questions: their pairs "
                "are cut on both sides and read little of each passage (a longer --max-length reads more)"
            )
    return tokenizer.pad(rows, padding=padding, return_tensors=tensors)


@functools.cache
def say_once(message: str) -> None:
    """A warning about the inputs that holds for the whole run: said the first time, not per batch."""
    log.warning(message)
