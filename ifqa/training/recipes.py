"""Every ``ifqa train`` command's options, as dataclasses (no heavy imports): the mined kinds' recipes and the
readers', whose loop settings are declared once (``run_recipe``). The defaults are the recipes reported in
docs/results.md, chosen on IfQA dev only."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from ifqa.configs import option
from ifqa.errors import IfqaError
from ifqa.llm.trained import READER_SETTINGS
from ifqa.registry import QUERY_MODES
from ifqa.retrieval import DEFAULT_ENCODER

#: every training command's --precision (devices.pick_precision's ``train`` work)
PRECISION_HELP = (
    "auto: bf16 autocast on a GPU with native bf16, else fp32 (every CPU: the same losses on any CPU); "
    "bf16 on a CPU with AMX or AVX-512 BF16 when asked."
)


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
    """What the training loop reads of a mined kind's recipe (``loop.LoopSettings.of``)."""

    epochs: int = option(1, "Passes over the training questions.", min=1)
    precision: str = option(  # devices.pick_precision's ``train`` work
        "auto", PRECISION_HELP, choices=("auto", "fp32", "bf16")
    )
    save_every: int = option(200, "Also save the resumable state every N steps (Ctrl-C saves it too).", min=1)

    def check(self) -> None:
        """Values that cannot make a step together, refused before mining."""

    def card_extra(self) -> dict:
        """What the model's card tells whoever loads it, beyond the recipe."""
        return {}


@dataclass(frozen=True)
class RerankerRecipe(LoopRecipe):
    """Train a cross-encoder reranker on IfQA training questions with mined hard negatives."""

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

    def check(self) -> None:
        if self.group_size < self.other_gold + 1:
            raise IfqaError(
                f"--group-size {self.group_size} leaves no room for the gold passage and --other-gold "
                f"{self.other_gold}; use a group of at least {self.other_gold + 1}"
            )


@dataclass(frozen=True)
class RetrieverRecipe(LoopRecipe):
    """Fine-tune a bi-encoder (all of it, or its question side only) on IfQA training questions."""

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

    def card_extra(self) -> dict:
        """Which passage encoder goes with the trained one (``encoders.py`` reads it)."""
        return {
            "question_side_only": self.question_side_only,
            "passage_encoder": self.model if self.question_side_only else "the trained model",
        }


@dataclass(frozen=True)
class ControlRecipe(MiningRecipe):
    """Fit the question-agnostic control (a passage classifier that never sees the question)."""

    seed: int = option(0, "Seed for the classifier.")
    weight: float = option(0.5, "Weight of the classifier's logit added to the first-stage score.")


@dataclass(frozen=True)
class RunRecipe:
    """The loop settings of a reader trained on a run file, declared once (``run_recipe``: a kind's defaults)."""

    #: a setting a kind's recipe once had, as its run records of that time read now: name -> (new name, values)
    RENAMED = {}

    epochs: int = option(1, "Passes over the training questions (when --steps is not given).", min=1)
    steps: int | None = option(None, "Optimizer steps in all (default: --epochs passes).", min=1)
    batch_size: int | None = option(8, "Questions per optimizer step, over all ranks.", min=1)
    accumulation: int = option(1, "Micro-batches per step (each of --batch-size / --accumulation questions).", min=1)
    lr: float = option(1e-4, "Peak learning rate (AdamW, linear warm-up then decay).", min=0.0)
    warmup_steps: int | None = option(None, "Steps of warm-up (default: 5% of the steps).", min=0)
    weight_decay: float = option(0.0, "AdamW weight decay.", min=0.0)
    max_grad_norm: float = option(1.0, "Gradients are clipped to this norm.", min=1e-6)
    eval_every: int = option(100, "Dev EM every N steps (with --dev-run); best/ keeps the best.", min=1)
    dev_questions: int | None = option(
        None, "Score dev EM on the dev run's first N questions while training (default: all).", min=1
    )
    eval_batch_size: int = option(16, "Questions per generation batch when scoring dev.", min=1)
    save_every: int | None = option(None, "Also save the resumable state every N steps.", min=1)
    seed: int = option(0, "Seed for data order, demonstrations and initialization.")
    precision: str = option("auto", PRECISION_HELP, choices=("auto", "fp32", "bf16"))
    gradient_checkpointing: bool = option(False, "Recompute activations to save memory.")


def run_recipe(name: str, **defaults) -> type:
    """``RunRecipe`` with a kind's own ``defaults`` (help and bounds as declared), for its recipe to subclass."""
    declared = {f.name: f for f in dataclasses.fields(RunRecipe)}
    if set(defaults) - set(declared):
        raise TypeError(f"not run recipe fields: {', '.join(sorted(set(defaults) - set(declared)))}")
    fields = [(k, declared[k].type, option(v, **declared[k].metadata)) for k, v in defaults.items()]
    return dataclasses.make_dataclass(name, fields, bases=(RunRecipe,), frozen=True)


@dataclass(frozen=True)
class FiDRecipe(
    run_recipe(
        "FiDRunRecipe",
        steps=15000,
        batch_size=None,
        warmup_steps=1000,
        weight_decay=0.01,
        eval_every=500,
        eval_batch_size=8,
    )
):
    """Train a Fusion-in-Decoder reader on a run file; rerun the same command to resume.

    What a FiD training run is; saved beside its checkpoints, so a resume with other settings is refused,
    except for those in ``HOW_NOT_WHAT``: they change speed and memory, not the result. Without
    ``--batch-size`` each rank takes 8 questions a step on a GPU, 1 on a CPU (``training/fid.py``)."""

    HOW_NOT_WHAT = ("compile", "no_compile", "gradient_checkpointing", "eval_batch_size", "save_every")
    RENAMED = {
        "fp32": ("precision", {True: "fp32", False: "auto"}),
        "bf16": ("precision", {True: "auto", False: "fp32"}),
    }

    model: str = option("t5-base", "T5 hub id or local folder (t5-base, google/flan-t5-large, ...).")
    compile: bool = option(
        False,
        "Compile the model with torch.compile (the default on CUDA, where it trains about "
        "2x faster; on a CPU only when asked).",
    )
    no_compile: bool = option(False, "Run the model eagerly, also on CUDA.")
    n_context: int = option(20, "Passages per question fed to the encoder.", min=1)
    text_maxlength: int = option(250, "Tokens per question+passage input.", min=1)
    answer_maxlength: int = option(20, "Tokens per target answer.", min=1)


CLOSED_BOOK_HELP = (
    "Open mode: this share of the training questions (a seeded choice) is trained with no passages in its "
    "prompt, so the reader learns to answer when no passage helps."
)


@dataclass(frozen=True)
class LLMRecipe(run_recipe("LLMRunRecipe")):
    """Fine-tune a causal LM to answer as `ifqa read llm` prompts it; rerun the same command to resume.

    The reader's settings (mode ... max_prompt_tokens) build every training prompt and go into the model card,
    which the reader then reads back; changing any other field but those in ``HOW_NOT_WHAT`` is another run."""

    HOW_NOT_WHAT = ("eval_batch_size", "save_every", "gradient_checkpointing")
    #: the fields that are the reader's settings: the prompt the model is trained on, recorded in its card
    READER = READER_SETTINGS

    model: str = option(
        "demo:smollm2",
        "Causal LM to fine-tune: a folder, a hub id, a GGUF file (dequantized by transformers) or demo:smollm2.",
    )
    mode: str = option(
        "open",
        "open: answer from the run's passages; qa: closed-book (the run gives questions only).",
        choices=("open", "qa"),
    )
    passages: int = option(3, "Open mode: top passages of the run in each prompt.", min=1)
    closed_book_share: float = option(0.0, CLOSED_BOOK_HELP, min=0.0, max=1.0)
    demos: int = option(0, "In-context demonstrations in each prompt (from the training questions).", min=0)
    selection: str = option(
        "random", "How demonstrations are chosen.", choices=("random", "similar"), flag="--demo-selection"
    )
    template: str | None = option(None, "Template file name (default: the mode's own).")
    prompts_dir: str | None = option(None, "Templates folder (default: the installed prompts).")
    max_prompt_tokens: int = option(
        512, "Prompt budget in tokens: longer prompts have their passages cut, as the reader cuts them.", min=64
    )
    lora_rank: int | None = option(None, "Train LoRA adapters of this rank (peft) instead of every weight.", min=1)
    lora_alpha: float | None = option(None, "LoRA scaling alpha (default: twice the rank).", min=0.0)
    lora_dropout: float = option(0.05, "Dropout on the LoRA adapters' inputs.", min=0.0, max=0.9)
    no_merge: bool = option(False, "Save the LoRA adapter alone, not merged into the model.")

    def alpha(self) -> float | None:
        """LoRA's scaling alpha: ``--lora-alpha``, else twice the rank."""
        return self.lora_alpha if self.lora_alpha is not None or self.lora_rank is None else 2 * self.lora_rank
