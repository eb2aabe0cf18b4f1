"""Training recipes for learned retrieval components, as configuration dataclasses (no heavy
imports: the command line builds ``ifqa train reranker|retriever`` options from them).

The defaults are the recipe reported in docs/results.md; they were chosen on IfQA dev only.
"""

from __future__ import annotations

from dataclasses import dataclass

from ifqa.configs import option
from ifqa.registry import QUERY_MODES
from ifqa.retrieval import DEFAULT_ENCODER


@dataclass(frozen=True)
class MiningRecipe:
    """How hard negatives are mined: the first stage's top passages for each training question."""

    index: str = option(None, "BM25 (or dense) index of the collection negatives are mined from.")
    query_mode: str = option("clean", "Query formulation used for mining.", choices=QUERY_MODES)
    hard_depth: int = option(30, "Mine negatives from this many top passages.", min=1)
    other_gold: int = option(2, "Gold passages of other questions added to each group as negatives.", min=0)
    other_gold_from: str = option(
        "random",
        "Other questions' gold passages: random, or sampled from the "
        "--hard-depth closest to the question by BM25 (lowers the gold-style "
        "preference; see docs/results.md).",
        choices=("random", "closest"),
    )


@dataclass(frozen=True)
class LoopRecipe(MiningRecipe):
    """What the training loop reads of a learned model's recipe (``loop.train_recipe``)."""

    epochs: int = option(1, "Passes over the training questions.", min=1)
    precision: str = option(  # devices.pick_precision's ``train`` work
        "auto",
        "auto: bf16 autocast on a GPU with native bf16, else fp32 (every CPU: the same losses on any CPU); "
        "bf16 on a CPU with AMX or AVX-512 BF16 when asked.",
        choices=("auto", "fp32", "bf16"),
    )
    save_every: int = option(200, "Also save the resumable state every N steps (Ctrl-C saves it too).", min=1)


@dataclass(frozen=True)
class RerankerRecipe(LoopRecipe):
    model: str = option(DEFAULT_ENCODER, "Starting checkpoint: any encoder or cross-encoder (folder or hub id).")
    questions_per_step: int = option(
        3, "Questions per optimizer step, over all ranks under torchrun/srun (each rank takes an equal share).", min=1
    )
    group_size: int = option(10, "Passages scored per question: one gold + negatives.", min=2)
    lr: float = option(8e-5, "Peak learning rate (linear warm-up over 10% of steps, then linear decay).", min=0.0)
    max_length: int = option(192, "Tokens per question+passage pair.", min=16)
    attention_dropout: float = option(
        0.1,
        "Dropout on attention probabilities while training (BERT-family "
        "encoders); 0 lets CPU attention use its fused kernel, about 2x faster steps.",
        min=0.0,
        max=0.9,
    )
    seed: int = option(0, "Seed for the head's initialization, data order and negative sampling.")


@dataclass(frozen=True)
class RetrieverRecipe(LoopRecipe):
    model: str = option(DEFAULT_ENCODER, "Starting sentence-transformers bi-encoder (folder or hub id).")
    question_side_only: bool = option(
        False, "Train only a copy used for questions: an existing passage index stays valid."
    )
    questions_per_step: int = option(
        32,
        "Questions per step, over all ranks under torchrun/srun (every "
        "question's passages are in-batch negatives for all).",
        min=2,
    )
    hard_negatives: int = option(1, "Mined negatives per question per step.", min=0)
    lr: float = option(2e-5, "Peak learning rate.", min=0.0)
    max_length: int = option(192, "Tokens per passage (questions are short).", min=16)
    temperature: float = option(0.05, "Softmax temperature of the in-batch contrastive loss.", min=1e-6)
    seed: int = option(0, "Seed for data order and negative sampling.")


@dataclass(frozen=True)
class ControlRecipe(MiningRecipe):
    seed: int = option(0, "Seed for the classifier.")
    weight: float = option(0.5, "Weight of the classifier's logit added to the first-stage score.")
