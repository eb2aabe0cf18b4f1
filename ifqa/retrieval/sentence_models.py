"""Sentence-transformers models read through transformers alone, for inference: a bi-encoder's folder layout
(``modules.json``: a transformers model, its pooling, a normalization; ``sentence_bert_config.json``: its
length limit and lower-casing; ``config_sentence_transformers.json``: its default prompt) and a
cross-encoder's (a sequence classifier). Importing sentence-transformers costs a command seconds before
its first batch (it imports scikit-learn, among others); reading the layout costs nothing. Training keeps
the library (``training/``), and the tests hold these outputs to the library's own.

A folder that is neither a sentence-transformers layout nor a transformers model, a module this reader
does not implement and a pooling mode it does not implement are each one line: never pooled another way.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from ifqa.errors import IfqaError

#: pooling modes read here (sentence-transformers' names); others are refused, never approximated
POOLING_MODES = ("mean", "cls", "max", "lasttoken", "mean_sqrt_len_tokens")
#: the legacy pooling config's flags, by the mode each one turns on
LEGACY_FLAGS = {
    "pooling_mode_cls_token": "cls",
    "pooling_mode_max_tokens": "max",
    "pooling_mode_mean_tokens": "mean",
    "pooling_mode_mean_sqrt_len_tokens": "mean_sqrt_len_tokens",
    "pooling_mode_weightedmean_tokens": "weightedmean",
    "pooling_mode_lasttoken": "lasttoken",
}


@dataclass(frozen=True)
class Layout:
    """What a model folder (or hub id) holds, as sentence-transformers would assemble it."""

    source: str  # the folder or hub id
    subfolder: str  # where in it the transformers model is ("" for the top)
    max_length: int | None  # sentence_bert_config.json's max_seq_length
    lower_case: bool
    pooling: str  # one of POOLING_MODES
    normalize: bool
    prompt: str  # the default prompt put before every text ("" for none)


def _file(source: str, name: str) -> Path | None:
    """``name`` in the folder or hub repository ``source``, None where it has no such file."""
    local = Path(source).expanduser()
    if local.is_dir():
        return local / name if (local / name).is_file() else None
    from transformers.utils import cached_file  # a hub id: the cache, or a download

    found = cached_file(source, name, _raise_exceptions_for_missing_entries=False)
    return Path(found) if found else None


def _missing(source: str, what: str) -> Exception:
    """A folder lacking ``what`` is one line; a hub id lacking it is the loader's to name (its cache, or the
    Hub that cannot be reached: ``models.loading``)."""
    if Path(source).expanduser().is_dir():
        return IfqaError(f"not a model folder: it holds {what}", source)
    return OSError(f"{source} holds {what} on the Hub or in the local cache")


def _json(path: Path | None) -> dict:
    if path is None:
        return {}
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError):
        raise IfqaError("is not readable JSON", path) from None
    return value if isinstance(value, (dict, list)) else {}


def _pooling(config: dict, where: str) -> str:
    """The one pooling mode a Pooling module's config names (its current or legacy keys)."""
    mode = config.get("pooling_mode")
    modes = [mode] if isinstance(mode, str) else list(mode or [])
    if not modes:
        modes = [flagged for key, flagged in LEGACY_FLAGS.items() if config.get(key)] or ["mean"]
    if len(modes) != 1 or modes[0] not in POOLING_MODES:
        raise IfqaError(
            f"pooling {'+'.join(modes)} is not implemented by ifqa (it reads {', '.join(POOLING_MODES)}); "
            "it is never pooled another way",
            where,
        )
    if config.get("include_prompt") is False:
        raise IfqaError("pooling that leaves the prompt out (include_prompt false) is not implemented by ifqa", where)
    return modes[0]


def read_layout(source: str) -> Layout:
    """The layout of a bi-encoder: its modules (a transformers model, then pooling and normalization) or,
    for a plain transformers model, mean pooling as sentence-transformers assembles one."""
    modules = _file(source, "modules.json")
    if modules is None:
        if _file(source, "config.json") is None:
            raise _missing(source, "neither modules.json (sentence-transformers) nor config.json (transformers)")
        return Layout(source, "", None, False, "mean", False, "")
    model, settings, pooling, normalize = None, {}, None, False
    for module in _json(modules):
        kind, path = str(module.get("type", "")), str(module.get("path", ""))
        name = kind.rsplit(".", 1)[-1]
        where = f"{source}/{path}" if path else source
        if name == "Transformer" and model is None:
            model = path
            settings = _json(
                _file(source, f"{path}/sentence_bert_config.json" if path else "sentence_bert_config.json")
            )
        elif name == "Pooling" and pooling is None:
            pooling = _pooling(_json(_file(source, f"{path}/config.json")), where)
        elif name == "Normalize":
            normalize = True
        else:
            raise IfqaError(
                f"its module {kind} is not implemented by ifqa's reader of sentence-transformers folders", modules
            )
    if model is None:
        raise IfqaError("its modules.json names no Transformer module", modules)
    st_config = _json(_file(source, "config_sentence_transformers.json"))
    prompts, default = st_config.get("prompts") or {}, st_config.get("default_prompt_name")
    return Layout(
        source,
        model,
        settings.get("max_seq_length"),
        bool(settings.get("do_lower_case")),
        pooling or "mean",
        normalize,
        prompts.get(default, "") if default else "",
    )


def pool(tokens, mask, mode: str):
    """Sentence vectors of ``tokens`` (batch x length x dim) over the positions ``mask`` keeps."""
    import torch

    weights = mask.unsqueeze(-1).to(tokens.dtype)
    if mode == "cls":
        first = mask.to(torch.int).argmax(dim=1)
        return tokens[torch.arange(tokens.shape[0]), first]
    if mode == "lasttoken":
        last = mask.shape[1] - 1 - mask.flip(1).to(torch.int).argmax(dim=1)
        return tokens[torch.arange(tokens.shape[0]), last]
    if mode == "max":
        return tokens.masked_fill(weights == 0, float("-inf")).max(dim=1).values
    total = (tokens * weights).sum(dim=1, dtype=torch.float32)
    count = torch.clamp(weights.sum(dim=1, dtype=torch.float32), min=1e-9)
    return (total / (count if mode == "mean" else torch.sqrt(count))).to(tokens.dtype)


def _max_length(tokenizer, config, asked: int | None) -> int:
    """The length inputs are cut at: the layout's, else the tokenizer's, at most the model's positions."""
    limit = asked or tokenizer.model_max_length
    positions = getattr(config, "max_position_embeddings", None)
    return min(limit, positions) if positions else limit


def sentence_model(layout: Layout, device: str):
    """A bi-encoder as a torch module: ``tokenize(texts)`` makes its inputs, and calling it on them gives
    ``{"sentence_embedding": ...}`` as a sentence-transformers model does."""
    import torch
    from transformers import AutoModel, AutoTokenizer

    class SentenceModel(torch.nn.Module):
        def __init__(self):
            super().__init__()
            where = {"subfolder": layout.subfolder} if layout.subfolder else {}
            self.tokenizer = AutoTokenizer.from_pretrained(layout.source, **where)
            self.encoder = AutoModel.from_pretrained(layout.source, **where).to(device)
            self.config = self.encoder.config
            self.max_seq_length = _max_length(self.tokenizer, self.config, layout.max_length)
            self.dimension = int(self.config.hidden_size)
            self.layout = layout

        def tokenize(self, texts: list[str]) -> dict:
            texts = [layout.prompt + t for t in texts]
            texts = [t.lower() for t in texts] if layout.lower_case else texts
            return dict(
                self.tokenizer(
                    texts, padding=True, truncation="longest_first", max_length=self.max_seq_length, return_tensors="pt"
                )
            )

        def forward(self, features: dict) -> dict:
            names = ("input_ids", "attention_mask", "token_type_ids")
            tokens = self.encoder(**{k: v for k, v in features.items() if k in names}).last_hidden_state
            vectors = pool(tokens, features["attention_mask"], layout.pooling)
            if layout.normalize:
                vectors = torch.nn.functional.normalize(vectors, p=2, dim=1)
            return {"sentence_embedding": vectors}

    return SentenceModel().eval()


@dataclass
class PairModel:
    """A cross-encoder: its sequence classifier, tokenizer and input length, as ``CrossEncoder`` holds them."""

    model: object
    tokenizer: object
    max_seq_length: int


def pair_model(source: str, device: str, max_length: int | None = None) -> PairModel:
    """A cross-encoder folder or hub id (a sentence-transformers CrossEncoder's, or any sequence
    classifier's) read through transformers."""
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    if _file(source, "config.json") is None:
        raise _missing(source, "no config.json (a transformers sequence classifier)")
    layout = _json(_file(source, "sentence_bert_config.json"))
    tokenizer = AutoTokenizer.from_pretrained(source)
    model = AutoModelForSequenceClassification.from_pretrained(source).to(device).eval()
    return PairModel(model, tokenizer, _max_length(tokenizer, model.config, max_length or layout.get("max_seq_length")))
