"""FiD as a reader trained on a run file (``runs.py``): its model, batches, loss and dev predictions."""

from __future__ import annotations

import json
import logging
import random
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
from transformers import AutoTokenizer

from ifqa.cards import FID_CONFIG
from ifqa.distributed import World
from ifqa.errors import IfqaError
from ifqa.io import atomic_dir, settled
from ifqa.readers.fid.data import Collator, FiDSettings
from ifqa.readers.fid.model import enable_checkpointing, load_model
from ifqa.readers.fid.predict import predict
from ifqa.training.loop import RESULT, STATE, TRAINER, batch_order
from ifqa.training.recipes import FiDRecipe
from ifqa.training.runs import Launch, Reader, ReaderKind, RunFiles, rank_rows, token_mean

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class _Batches:
    """The tensors of micro-step ``g``, a pure function of the seed (a resumed run sees the same data). With a
    compiled model labels are padded to ``answer_maxlength`` (loss unchanged: padded positions are ignored and the
    decoder is causal), so every step has one shape and nothing recompiles."""

    records: Sequence[dict]
    collator: Collator
    recipe: FiDRecipe
    fixed_shape: bool
    world: World

    def __call__(self, g: int) -> dict:
        recipe = self.recipe
        step, micro = divmod(g, recipe.accumulation)
        batch = [self.records[i] for i in batch_order(len(self.records), recipe.batch_size, recipe.seed, g)]
        choice = random.Random(f"{recipe.seed}:{step}:{micro}")
        labels = self.collator.labels([choice.choice(r["answers"]) for r in batch])
        if self.fixed_shape and labels.shape[1] < recipe.answer_maxlength:
            labels = torch.nn.functional.pad(labels, (0, recipe.answer_maxlength - labels.shape[1]), value=-100)
        rows, tokens = rank_rows(self.world, labels)
        return {**self.collator.inputs(batch[rows]), "labels": labels[rows], **tokens}


def check(recipe: FiDRecipe, output: Path) -> None:
    resumable = (settled(output / STATE) / TRAINER).exists() or (output / RESULT).exists()
    if not resumable and (output / "last" / "trainer_state.pt").exists():  # never trained over from step 0
        raise IfqaError(
            "holds a run an earlier ifqa saved (last/trainer_state.pt), which this one cannot resume; finish it "
            "with that version, or train into a new --output",
            output,
        )


def load(recipe: FiDRecipe, launch: Launch, files: RunFiles) -> Reader:
    """The T5 to train (activations recomputed when asked), its batches and loss."""
    fid, world = FiDSettings(recipe.n_context, recipe.text_maxlength, recipe.answer_maxlength), launch.world
    model = load_model(recipe.model)
    tokenizer = AutoTokenizer.from_pretrained(str(recipe.model))
    if recipe.gradient_checkpointing:  # in a form that compiles to one graph
        enable_checkpointing(model)

    def loss(inputs: dict, forward):
        tokens, labels = inputs.pop("global_tokens", None), inputs["labels"]
        value = forward(**inputs).loss  # T5's mean over this rank's answer tokens
        return value if tokens is None else token_mean(value * (labels != -100).sum(), labels, tokens, world.size)

    def answers(records: Sequence[dict]) -> list[str]:
        found = predict(model, tokenizer, records, fid, recipe.eval_batch_size, bf16=launch.precision == "bf16")
        model.train()
        return found

    def checkpoint(target: Path, **facts) -> None:
        """A checkpoint folder written aside and swapped in (``io.atomic_dir``)."""
        with atomic_dir(target) as tmp:
            model.save_pretrained(tmp)
            tokenizer.save_pretrained(tmp)
            (tmp / FID_CONFIG).write_text(json.dumps(asdict(fid), indent=2))

    return Reader(
        model=model,
        parameters=list(model.parameters()),
        prepare=_Batches(files.train, Collator(tokenizer, fid), recipe, launch.compiled, world),
        loss=loss,
        predict=answers,
        checkpoint=checkpoint,
        memory=(
            f"a batch of {recipe.batch_size} questions x {recipe.n_context} passages",
            "memory: the same command with --gradient-checkpointing resumes from the last whole step "
            "(saved), or train into a new --output with a smaller --batch-size and --accumulation",
        ),
    )


KIND = ReaderKind(
    name="fid",
    check=check,
    batch_per_rank=(8, 1),  # a GPU is filled at 8 questions (the speed goal is measured there); 1 on a CPU
    micro_batch=lambda recipe: recipe.batch_size,
    load=load,
)


train = KIND.train
