"""Tiny models the tests (and the GPU suite) build: a tiny BERT that trains in seconds, and
all-MiniLM-L6-v2 where no network is (the shipped package's copy, else a random model of its shape)."""

from __future__ import annotations

from pathlib import Path

MINILM = "sentence-transformers/all-MiniLM-L6-v2"
MINILM_SHAPE = dict(
    hidden_size=384, num_hidden_layers=6, num_attention_heads=12, intermediate_size=1536, max_position_embeddings=512
)


def minilm_tokenizer(folder: Path):
    """all-MiniLM-L6-v2's tokenizer where its package is installed, else a WordPiece tokenizer of its
    kind (lower-cased BERT) trained here on the demo passages: a GPU machine may hold neither the
    package nor a network."""
    from transformers import AutoTokenizer

    from ifqa.retrieval.encoders import resolve

    shipped = resolve(MINILM)
    if shipped != MINILM:
        return AutoTokenizer.from_pretrained(shipped)
    return wordpiece_tokenizer(folder)


def wordpiece_tokenizer(folder: Path, texts: list[str] | None = None):
    """A lower-cased WordPiece tokenizer (BERT's kind) trained on ``texts`` (the demo passages), saved in ``folder``."""
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    if texts is None:
        from ifqa.retrieval.encoders import demo_texts

        texts = demo_texts()
    special = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    tokenizer = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    tokenizer.normalizer = normalizers.BertNormalizer(lowercase=True)
    tokenizer.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tokenizer.decoder = decoders.WordPiece()
    tokenizer.train_from_iterator(texts, trainers.WordPieceTrainer(vocab_size=30522, special_tokens=special))
    tokenizer.post_processor = processors.BertProcessing(("[SEP]", 3), ("[CLS]", 2))
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tokenizer,
        pad_token="[PAD]",
        unk_token="[UNK]",
        cls_token="[CLS]",
        sep_token="[SEP]",
        mask_token="[MASK]",
    )
    fast.save_pretrained(folder)
    return fast


def minilm(folder: Path) -> str:
    """all-MiniLM-L6-v2: the shipped package's folder where installed, else a sentence-transformers
    model of its shape (random weights, mean pooling, normalized) built in ``folder``."""
    from ifqa.retrieval.encoders import resolve

    shipped = resolve(MINILM)
    if shipped != MINILM:
        return shipped
    import torch
    from sentence_transformers import SentenceTransformer
    from transformers import BertConfig, BertModel

    try:
        from sentence_transformers.sentence_transformer.modules import Normalize, Pooling, Transformer
    except ImportError:  # sentence-transformers before 6
        from sentence_transformers.models import Normalize, Pooling, Transformer

    torch.manual_seed(0)
    tokenizer = wordpiece_tokenizer(folder / "bert")
    BertModel(BertConfig(vocab_size=len(tokenizer), **MINILM_SHAPE)).save_pretrained(folder / "bert")
    word = Transformer(str(folder / "bert"), max_seq_length=256)
    dimension = getattr(word, "get_embedding_dimension", None) or word.get_word_embedding_dimension
    SentenceTransformer(modules=[word, Pooling(dimension(), "mean"), Normalize()]).save(str(folder / "model"))
    return str(folder / "model")


def tiny_bert(folder: Path) -> Path:
    import torch
    from transformers import BertConfig, BertModel

    tokenizer = minilm_tokenizer(folder / "tokenizer")
    torch.manual_seed(0)
    config = BertConfig(
        vocab_size=len(tokenizer),
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=256,
    )
    BertModel(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder
