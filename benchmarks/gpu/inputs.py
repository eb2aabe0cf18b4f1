"""What the sections measure on: the demo passages repeated, and random-weight models of the real shapes."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

from gpu.workspace import Workspace
from tests.training.tiny import wordpiece_tokenizer

REAL_TOKENIZER = "sentence-transformers/all-MiniLM-L6-v2"


def demo_passages() -> list[dict]:
    from ifqa.datasets.demo import packaged_passages

    with gzip.open(packaged_passages(), "rt", encoding="utf-8") as handle:
        return [json.loads(line) for line in handle]


def write_collection(path: Path, n: int) -> None:
    """``n`` passages: the demo collection's, repeated with new ids (the lengths of real ones), streamed."""
    base = demo_passages()
    tails = [json.dumps({k: v for k, v in p.items() if k != "id"}, ensure_ascii=False)[1:] for p in base]
    with open(path, "w", encoding="utf-8") as handle:
        for start in range(0, n, 65536):
            handle.write(
                "".join(f'{{"id": "{i}", {tails[i % len(tails)]}\n' for i in range(start, min(n, start + 65536)))
            )


def passage_texts(n: int) -> list[str]:
    """What the encoders read of the first ``n`` passages of ``write_collection`` (``title. text``)."""
    from ifqa.retrieval.encoders import passage_text

    base = [passage_text(p) for p in demo_passages()]
    return [base[i % len(base)] for i in range(n)]


def real_tokenizer(given: str | None) -> str | None:
    """The tokenizer folder to use: ``--tokenizer``, else all-MiniLM-L6-v2's own where installed."""
    if given:
        return given
    from ifqa.retrieval.encoders import resolve

    folder = resolve(REAL_TOKENIZER)
    return folder if folder != REAL_TOKENIZER else None


def build_models(work: Workspace, size: dict, tokenizer_dir: str | None) -> dict[str, Path]:
    """Random-weight bi-encoder, cross-encoder and FiD T5 folders of the real shapes, with the real
    tokenizer (``tokenizer_dir``; None: one trained on the demo passages)."""
    import torch
    from transformers import (
        AutoTokenizer,
        BertConfig,
        BertForSequenceClassification,
        BertModel,
        DPRConfig,
        DPRContextEncoder,
        DPRQuestionEncoder,
        T5Config,
    )

    from ifqa.readers.fid.model import FiDT5

    try:
        from sentence_transformers.sentence_transformer.modules import Normalize, Pooling, Transformer
    except ImportError:  # sentence-transformers before 6
        from sentence_transformers.models import Normalize, Pooling, Transformer
    from sentence_transformers import SentenceTransformer

    torch.manual_seed(0)
    models = work.new("models")
    folders = {name: models / name for name in ("bert", "encoder", "reranker", "t5")}
    folders["dpr"] = models / "dpr-ctx_encoder"  # its question encoder beside it, as ifqa finds one by name
    if tokenizer_dir is None:
        wordpiece_tokenizer(models / "tokenizer", [p["text"] for p in demo_passages()])
    source = tokenizer_dir or str(models / "tokenizer")
    tokenizer = AutoTokenizer.from_pretrained(source)
    bert = BertConfig(vocab_size=max(len(tokenizer), 30522), **size["bert"])
    BertModel(bert).save_pretrained(folders["bert"])
    tokenizer.save_pretrained(folders["bert"])
    word = Transformer(str(folders["bert"]), max_seq_length=256)  # all-MiniLM-L6-v2's own limit
    dimension = getattr(word, "get_embedding_dimension", None) or word.get_word_embedding_dimension
    SentenceTransformer(modules=[word, Pooling(dimension(), "mean"), Normalize()]).save(str(folders["encoder"]))
    BertForSequenceClassification(BertConfig(**{**bert.to_dict(), "num_labels": 1})).save_pretrained(
        folders["reranker"]
    )
    tokenizer.save_pretrained(folders["reranker"])
    dpr = DPRConfig(**{"max_position_embeddings": 512, **size["dpr"], "vocab_size": bert.vocab_size})
    for encoder, folder in ((DPRContextEncoder, folders["dpr"]), (DPRQuestionEncoder, models / "dpr-question_encoder")):
        encoder(dpr).save_pretrained(folder)
        tokenizer.save_pretrained(folder)
    from fid_throughput import T5_BASE

    shape = T5_BASE if size["t5"] == "t5-base" else T5_TINY
    t5_tokenizer = AutoTokenizer.from_pretrained(source, eos_token="[SEP]")  # pad 0, eos [SEP]: T5's roles
    FiDT5(T5Config(**{**shape, "eos_token_id": t5_tokenizer.eos_token_id})).save_pretrained(folders["t5"])
    t5_tokenizer.save_pretrained(folders["t5"])
    return folders


T5_TINY = dict(  # the smoke run's T5; the full run takes fid_throughput's t5-base shape
    vocab_size=32128,
    d_model=32,
    d_kv=8,
    d_ff=64,
    num_layers=2,
    num_decoder_layers=2,
    num_heads=4,
    dropout_rate=0.1,
    decoder_start_token_id=0,
    pad_token_id=0,
)
