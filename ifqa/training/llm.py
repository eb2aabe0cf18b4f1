"""``ifqa train llm``: a causal LM fine-tuned to answer as ``ifqa read llm`` prompts it (a ``runs.py`` reader). The
reader builds every training prompt, so the prompt trained on is the prompt read with; dev EM is its ``read_batch``.
Rows are padded on the left, so every answer ends at the last position and the LM head runs over answers alone."""

from __future__ import annotations

import copy
import dataclasses
import functools
import importlib.util
import logging
import random
from pathlib import Path

import torch

from ifqa.artifacts import Example, recorded_questions
from ifqa.cards import write_card
from ifqa.distributed import World
from ifqa.errors import IfqaError
from ifqa.io import atomic_dir
from ifqa.llm.gguf_forms import ADAPTER, check_base, write_adapter
from ifqa.llm.local_models import PREFIX, is_local_file_model, model_content, model_file, whole_digest
from ifqa.llm.session import ModelSession
from ifqa.llm.trained import KIND as CARD_KIND
from ifqa.llm.trained import base_digest
from ifqa.models import check_causal_lm
from ifqa.readers.llm.config import LLMReaderConfig
from ifqa.readers.llm.reader import LLMReader
from ifqa.training.loop import batch_order
from ifqa.training.recipes import LLMRecipe
from ifqa.training.runs import Launch, Reader, ReaderKind, RunFiles, rank_rows, run_steps, token_mean
from ifqa.version import __version__

log = logging.getLogger(__name__)


def reader_config(recipe: LLMRecipe) -> LLMReaderConfig:
    """The reader trained for: hf in float32 on the CPU (the loop moves the model), no response cache (the weights
    change under it), the recipe's prompt settings, never a trained model's card's."""
    settings = {name: getattr(recipe, name) for name in LLMRecipe.READER}
    fixed = {"backend": "hf", "device": "cpu", "dtype": "float32", "no_cache": True, "follow_card": False}
    return LLMReaderConfig(model=recipe.model, batch_size=recipe.eval_batch_size, **fixed, **settings)


def base_name(model: str) -> str:
    """How a card names its base model: a ``demo:`` name or hub id as given, a path made absolute."""
    path = Path(model).expanduser()
    return model if model.startswith(PREFIX) or not path.exists() else str(path.resolve())


def _examples(records: list[dict]) -> list[Example]:
    return [Example(str(r["qid"]), r["question"], list(r.get("answers") or [])) for r in records]


def _check_runs(train: list[dict], recipe: LLMRecipe, train_run) -> list[dict]:
    """Every training record has an answer to train on and (open mode) passages to read."""
    for record in train:
        if not record.get("answers"):
            raise IfqaError(f"question {record.get('qid')} has no answer to train on", train_run)
        if recipe.mode == "open" and not record.get("ctxs"):
            raise IfqaError(f"--mode open: question {record.get('qid')} has no passages in the run", train_run)
    return train


def _target(tokenizer, chat: bool, prompt: str, prompt_ids: list[int], answer: str) -> list[int]:
    """The answer's tokens after ``prompt_ids``: with a chat template, the assistant's turn up to its end-of-turn
    token (``prompt`` the user's); plainly, the answer and EOS."""
    eos = tokenizer.eos_token_id
    if chat:
        whole = tokenizer.apply_chat_template(
            [{"role": "user", "content": prompt}, {"role": "assistant", "content": answer}], tokenize=False
        )
        ids = tokenizer(whole, add_special_tokens=False)["input_ids"]
        if ids[: len(prompt_ids)] == prompt_ids and len(ids) > len(prompt_ids):
            tail = ids[len(prompt_ids) :]
            return tail[: tail.index(eos) + 1] if eos in tail else tail
        return tokenizer(answer, add_special_tokens=False)["input_ids"] + [eos]
    return tokenizer(" " + answer, add_special_tokens=False)["input_ids"] + ([eos] if eos is not None else [])


def closed_book(qid: str, share: float, seed: int) -> bool:
    """Whether ``qid`` is among the ``share`` trained without passages (seeded: the same in every epoch)."""
    return share > 0 and random.Random(f"{seed}:closed-book:{qid}").random() < share


def tokenized_examples(
    reader: LLMReader, records: list[dict], seed: int, closed_book_share: float = 0.0
) -> list[tuple[list[int], list[int]]]:
    """(prompt tokens, answer tokens) per training question: the prompt as the reader sends it (no passages for
    the ``closed_book_share``), the first reference answer (as demonstrations show it)."""
    backend, tokenizer = reader.session.backend, reader.session.backend.tokenizer
    params = reader.session.access.params(1, 0.0, (), seed)
    contexts = {
        str(r["qid"]): [] if closed_book(str(r["qid"]), closed_book_share, seed) else r.get("ctxs") or []
        for r in records
    }
    built = []
    for example in _examples(records):
        text = reader.prompt_for(example, contexts).text
        formatted = backend.format_prompt(text, params)
        prompt_ids = tokenizer(formatted, add_special_tokens=not backend.chat)["input_ids"]
        built.append((prompt_ids, _target(tokenizer, backend.chat, text, prompt_ids, example.answers[0])))
    return built


@dataclasses.dataclass(frozen=True)
class _Batches:
    """Micro-batch ``g``'s tensors, a pure function of the seed: rows padded on the left (the last ``keep``
    positions hold every answer), positions counted from each row's first token, as generation counts them."""

    examples: list
    recipe: LLMRecipe
    pad: int
    world: World

    def __call__(self, g: int) -> dict:
        micro = self.recipe.batch_size // self.recipe.accumulation
        inputs = self.collate([self.examples[i] for i in batch_order(len(self.examples), micro, self.recipe.seed, g)])
        rows, tokens = rank_rows(self.world, inputs["labels"])
        return {**{k: v[rows] if torch.is_tensor(v) else v for k, v in inputs.items()}, **tokens}

    def collate(self, rows: list) -> dict:
        """(prompt, answer) token rows as one left-padded batch."""
        width = max(len(p) + len(a) for p, a in rows)
        keep = max(len(a) for _, a in rows) + 1
        ids = torch.full((len(rows), width), self.pad, dtype=torch.long)
        mask = torch.zeros((len(rows), width), dtype=torch.long)
        labels = torch.full((len(rows), keep - 1), -100, dtype=torch.long)
        for n, (prompt, answer) in enumerate(rows):
            whole = prompt + answer
            ids[n, width - len(whole) :] = torch.tensor(whole)
            mask[n, width - len(whole) :] = 1
            labels[n, keep - 1 - len(answer) :] = torch.tensor(answer)
        inputs = {"input_ids": ids, "attention_mask": mask, "position_ids": (mask.cumsum(1) - 1).clamp(min=0)}
        return {**inputs, "labels": labels, "keep": keep}


def answer_loss(inputs: dict, forward, ranks: int = 1):
    """Mean cross-entropy over the answer tokens, the LM head applied to the last ``keep`` positions alone."""
    keep, labels, tokens = inputs.pop("keep"), inputs.pop("labels"), inputs.pop("global_tokens", None)
    logits = forward(**inputs, logits_to_keep=keep).logits[:, :-1].float()
    total = torch.nn.functional.cross_entropy(
        logits.reshape(-1, logits.shape[-1]), labels.reshape(-1), ignore_index=-100, reduction="sum"
    )
    return token_mean(total, labels, tokens, ranks)


def _with_lora(model, recipe: LLMRecipe):
    """The model with LoRA adapters on every linear layer (peft), or as it is without ``--lora-rank``."""
    if recipe.lora_rank is None:
        return model
    import peft  # LoRA alone needs it (checked before the model loads)

    config = peft.LoraConfig(
        r=recipe.lora_rank,
        lora_alpha=recipe.alpha(),
        lora_dropout=recipe.lora_dropout,
        target_modules="all-linear",
        task_type="CAUSAL_LM",
    )
    return peft.get_peft_model(model, config)


def _save(backend, recipe: LLMRecipe, made: dict, gguf_base: Path | None, target: Path, **facts) -> None:
    """A trained folder written whole with its card (``made``, this save's ``facts``): on a GGUF base a LoRA run's
    ``adapter.gguf`` (read by llama.cpp and hf), else the model (LoRA merged unless ``--no-merge``), tokenizer."""
    model = backend.model
    with atomic_dir(target) as tmp:
        card = {**made, **facts}
        if gguf_base is not None and recipe.lora_rank is not None:
            alpha = recipe.alpha()
            write_adapter(tmp / ADAPTER, gguf_base, made["base_digest"], alpha, lora_pairs(model))
            card["adapter"] = {"file": ADAPTER, "digest": whole_digest(tmp / ADAPTER), "alpha": alpha}
        else:
            if recipe.lora_rank is not None and not recipe.no_merge:
                model = copy.deepcopy(model).merge_and_unload()  # the training copy keeps its adapters
            model.save_pretrained(tmp)
            backend.tokenizer.save_pretrained(tmp)
        write_card(tmp, card)


def lora_pairs(model) -> dict:
    """A peft model's LoRA factors by the transformers name of the layer they adapt: (A, B) as arrays."""

    def array(factors):
        return factors["default"].weight.detach().float().cpu().numpy()

    return {
        name.removeprefix("base_model.model."): (array(module.lora_A), array(module.lora_B))
        for name, module in model.named_modules()
        if "default" in (getattr(module, "lora_A", None) or {})
    }


def _check_model(recipe: LLMRecipe) -> None:
    """What cannot train, refused before the model loads: ``--no-merge`` with a base no adapter can name."""
    if recipe.lora_rank is not None:
        try:
            import peft  # noqa: F401 - absent, or present and broken: one line either way
        except ImportError as exc:
            broken = "" if importlib.util.find_spec("peft") is None else f", and peft cannot be imported ({exc})"
            raise IfqaError(f"--lora-rank trains through peft{broken}: pip install 'ifqa[lora]'") from None
    if recipe.no_merge and recipe.lora_rank is None:
        raise IfqaError("--no-merge keeps a LoRA adapter apart: give --lora-rank too")
    if recipe.no_merge and is_local_file_model(recipe.model):
        raise IfqaError(
            f"--no-merge: on a GGUF --model ({recipe.model}) the adapter is always saved apart, as adapter.gguf "
            "(read by --backend llamacpp and hf); leave --no-merge out"
        )
    check_causal_lm(recipe.model, "--model", " (FiD trains T5: ifqa train fid)")
    if recipe.lora_rank is not None and is_local_file_model(recipe.model):
        check_base(model_file(recipe.model))  # its adapter is written as GGUF: an architecture it can be written for
    if recipe.closed_book_share and recipe.mode != "open":
        raise IfqaError(f"--closed-book-share leaves passages out of open prompts; --mode {recipe.mode} has none")
    if recipe.batch_size % recipe.accumulation:
        raise IfqaError(f"--batch-size {recipe.batch_size} is not a multiple of --accumulation {recipe.accumulation}")


def load(recipe: LLMRecipe, launch: Launch, files: RunFiles) -> Reader:
    """The causal LM as the reader reads it (LoRA adapters when asked), its prompts tokenized."""
    config, world = reader_config(recipe), launch.world
    session = ModelSession.open(config)
    backend = session.backend
    model = backend.model
    if getattr(model, "hf_quantizer", None) is not None:  # a GGUF file, dequantized: plain weights now,
        model.hf_quantizer, model.is_quantized = None, False  # trained and saved as such (transformers refuses "gguf")
    # demonstrations come from the training questions, as the reader's default pool does
    reader = LLMReader(session, config, _examples(files.train) if recipe.demos else [], set())
    examples = tokenized_examples(reader, files.train, recipe.seed, recipe.closed_book_share)
    if recipe.gradient_checkpointing:
        backend.model.gradient_checkpointing_enable()
        backend.model.enable_input_require_grads()
    backend.model = _with_lora(backend.model, recipe)
    gguf_base = model_file(recipe.model) if is_local_file_model(recipe.model) else None  # resolved once
    return Reader(
        model=backend.model,
        parameters=[p for p in backend.model.parameters() if p.requires_grad],
        prepare=_Batches(examples, recipe, backend.tokenizer.pad_token_id, world),
        loss=lambda inputs, forward: answer_loss(inputs, forward, world.size),
        predict=lambda records: _answers(reader, records, recipe.eval_batch_size),
        checkpoint=functools.partial(_save, backend, recipe, card(recipe, files, reader), gguf_base),
        memory=(
            f"a batch of {recipe.batch_size // recipe.accumulation} prompts of up to {recipe.max_prompt_tokens} tokens",
            "memory: the same command with --gradient-checkpointing resumes from the last whole step (saved), or "
            "train into a new --output with a larger --accumulation",
        ),
    )


def card(recipe: LLMRecipe, files: RunFiles, reader: LLMReader) -> dict:
    """A trained folder's card: the base model and its bytes, the data, the reader settings, the recipe."""
    local = is_local_file_model(recipe.model)
    scored = min(len(files.dev), recipe.dev_questions or len(files.dev))
    return {
        "ifqa": __version__,
        "kind": CARD_KIND,
        "base_model": base_name(recipe.model),
        "base_digest": base_digest(recipe.model) if local else model_content(recipe.model).get("content"),
        "training_data": {**_data(files.train_run), "trained_on": len(files.train)},
        "reader": {
            **{name: getattr(recipe, name) for name in LLMRecipe.READER},
            "backend": "hf",
            "template_file": reader.template.name,
            "chat": reader.session.backend.chat,
        },
        "recipe": dataclasses.asdict(recipe),
        "steps": run_steps(recipe, len(files.train)),
        "lora": None if recipe.lora_rank is None else {"rank": recipe.lora_rank, "merged": not recipe.no_merge},
        "dev": {**_data(files.dev_run), "scored": scored} if files.dev_run else None,
    }


def _data(run) -> dict:
    return {"run": str(run), "questions": recorded_questions(run)}


def _answers(reader: LLMReader, records: list[dict], size: int) -> list[str]:
    """The reader's own answers to dev records, in batches of ``size``, the model in eval mode."""
    model, examples = reader.session.backend.model, _examples(records)
    contexts = {str(r["qid"]): r.get("ctxs") or [] for r in records}
    model.eval()
    try:
        return [
            r["prediction"]
            for s in range(0, len(examples), size)
            for r in reader.read_batch(examples[s : s + size], contexts)
        ]
    finally:
        model.train()


KIND = ReaderKind(
    name=CARD_KIND,
    check=lambda recipe, output: _check_model(recipe),
    keep=_check_runs,
    micro_batch=lambda recipe: recipe.batch_size // recipe.accumulation,
    load=load,
)


train = KIND.train
