"""A tiny BERT (random weights, the offline MiniLM's vocabulary) that tests train in seconds."""

from __future__ import annotations

from pathlib import Path


def tiny_bert(folder: Path) -> Path:
    import torch
    from transformers import AutoTokenizer, BertConfig, BertModel

    from ifqa.retrieval.encoders import resolve

    tokenizer = AutoTokenizer.from_pretrained(resolve("all-MiniLM-L6-v2"))
    torch.manual_seed(0)
    config = BertConfig(
        vocab_size=tokenizer.vocab_size,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=256,
    )
    BertModel(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder
