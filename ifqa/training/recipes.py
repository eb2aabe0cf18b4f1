"""Training recipes for learned retrieval components, as configuration dataclasses (no heavy
imports: the command line builds ``ifqa train reranker|retriever`` options from them).

The defaults are the recipe reported in the README; they were chosen on IfQA dev only.
"""

from __future__ import annotations

from dataclasses import dataclass, field

DEFAULT_ENCODER = "sentence-transformers/all-MiniLM-L6-v2"


def _o(default, help: str, **meta):
    return field(default=default, metadata={"help": help, **meta})


@dataclass(frozen=True)
class MiningRecipe:
    """How hard negatives are mined: the first stage's top passages for each training question."""

    index: str = _o(None, "BM25 (or dense) index of the collection negatives are mined from.")
    query_mode: str = _o("clean", "Query formulation used for mining.")
    hard_depth: int = _o(30, "Mine negatives from this many top passages.", min=1)
    other_gold: int = _o(2, "Gold passages of other questions added to each group as negatives.", min=0)


@dataclass(frozen=True)
class RerankerRecipe(MiningRecipe):
    model: str = _o(DEFAULT_ENCODER, "Starting checkpoint: any encoder or cross-encoder (folder or hub id).")
    epochs: int = _o(1, "Passes over the training questions.", min=1)
    questions_per_step: int = _o(3, "Questions per optimizer step.", min=1)
    group_size: int = _o(10, "Passages scored per question: one gold + negatives.", min=2)
    lr: float = _o(8e-5, "Peak learning rate (linear warm-up over 10% of steps, then linear decay).")
    max_length: int = _o(192, "Tokens per question+passage pair.", min=16)
    seed: int = _o(0, "Seed for the head's initialization, data order and negative sampling.")
    fp32: bool = _o(False, "Train in fp32 even where bf16 autocast is supported.")


@dataclass(frozen=True)
class RetrieverRecipe(MiningRecipe):
    model: str = _o(DEFAULT_ENCODER, "Starting sentence-transformers bi-encoder (folder or hub id).")
    question_side_only: bool = _o(False, "Train only a copy used for questions: an existing passage index stays valid.")
    epochs: int = _o(1, "Passes over the training questions.", min=1)
    questions_per_step: int = _o(32, "Questions per step (each other's passages are in-batch negatives).", min=2)
    hard_negatives: int = _o(1, "Mined negatives per question per step.", min=0)
    lr: float = _o(2e-5, "Peak learning rate.")
    max_length: int = _o(192, "Tokens per passage (questions are short).", min=16)
    temperature: float = _o(0.05, "Softmax temperature of the in-batch contrastive loss.")
    seed: int = _o(0, "Seed for data order and negative sampling.")
    fp32: bool = _o(False, "Train in fp32 even where bf16 autocast is supported.")


@dataclass(frozen=True)
class ControlRecipe(MiningRecipe):
    seed: int = _o(0, "Seed for the classifier.")
    weight: float = _o(0.5, "Weight of the classifier's logit added to the first-stage score.")
