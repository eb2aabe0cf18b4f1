"""Tiny models and a tokenizer built by the tests themselves (no hub access needed)."""

from __future__ import annotations

from pathlib import Path

from ifqa.datasets.demo import load_demo


def corpus_lines() -> list[str]:
    lines = []
    for example in load_demo("dev") + load_demo("train"):
        lines += [example.question, " ".join(example.answers), *example.context]
    lines += [
        "Answer each question with a short phrase.",
        "Question: Answer: Passages: Background document:",
        "So the answer is",
        "question: title: context:",
    ]
    return lines


def train_tokenizer(folder: Path, vocab: int = 600, t5: bool = False):
    """A byte-level BPE tokenizer trained on the demo text, saved as a transformers fast tokenizer."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    special = ["<pad>", "</s>", "<unk>", "<s>"]
    tokenizer = Tokenizer(models.BPE(unk_token="<unk>"))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    tokenizer.train_from_iterator(
        corpus_lines(),
        trainers.BpeTrainer(
            vocab_size=vocab, special_tokens=special, initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
        ),
    )
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tokenizer, pad_token="<pad>", eos_token="</s>", unk_token="<unk>", bos_token="<s>"
    )
    fast.save_pretrained(folder)
    return fast


# A chat template that thinks, as Qwen3's does: the generation prompt opens a <think> block, unless the
# template's switch (enable_thinking=False) writes an empty one.
THINKING_TEMPLATE = (
    "{% for m in messages %}<s>{{ m['content'] }}</s>{% endfor %}{% if add_generation_prompt %}<s>"
    "{% if enable_thinking is defined and not enable_thinking %}<think>\n\n</think>\n\n{% else %}<think>\n"
    "{% endif %}{% endif %}"
)


def tiny_llama(folder: Path, chat: bool = False, thinking: bool = False) -> Path:
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    tokenizer = train_tokenizer(folder)
    if chat or thinking:
        tokenizer.chat_template = (
            THINKING_TEMPLATE
            if thinking
            else "{% for m in messages %}<s>{{ m['content'] }}</s>{% endfor %}{% if add_generation_prompt %}<s>{% endif %}"
        )
        tokenizer.save_pretrained(folder)
    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=2048,
        pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id,
        bos_token_id=tokenizer.bos_token_id,
    )
    LlamaForCausalLM(config).save_pretrained(folder)
    return folder


def tiny_t5(folder: Path) -> Path:
    import torch
    from transformers import T5Config

    from ifqa.readers.fid.model import FiDT5

    tokenizer = train_tokenizer(folder)
    torch.manual_seed(0)
    config = T5Config(
        vocab_size=len(tokenizer),
        d_model=32,
        d_kv=8,
        d_ff=64,
        num_layers=2,
        num_decoder_layers=2,
        num_heads=4,
        dropout_rate=0.1,
        pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id,
        decoder_start_token_id=tokenizer.pad_token_id,
    )
    FiDT5(config).save_pretrained(folder)
    return folder
