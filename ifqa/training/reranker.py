"""`ifqa train reranker`: a cross-encoder (sentence-transformers ``CrossEncoder``) trained on IfQA.

Each step scores, for a few questions, the question against one gold passage, the other
questions' gold passages and mined hard negatives; the loss is cross-entropy over each question's
group (the gold passage must win). Any encoder checkpoint can start it (default: the offline
all-MiniLM-L6-v2 weights, given a fresh scoring head) or a trained cross-encoder.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path

from ifqa.devices import Device
from ifqa.distributed import World
from ifqa.errors import IfqaError
from ifqa.io import atomic_dir
from ifqa.models import library_model, pair_inputs
from ifqa.retrieval.encoders import resolve
from ifqa.training.data import PER_STEP, TrainingGroup, planned_steps
from ifqa.training.loop import Trainee
from ifqa.training.recipes import RerankerRecipe

log = logging.getLogger(__name__)


def trainee(groups: Sequence[TrainingGroup], recipe: RerankerRecipe, world: World, device: Device) -> Trainee:
    """The cross-encoder, its steps and loss; its finished model is ``output/model`` (a CrossEncoder folder)."""
    import torch
    from sentence_transformers import CrossEncoder

    groups = [g for g in groups if g.positives and len(g.negatives) + len(g.other_gold) >= 1]
    if not groups:
        raise IfqaError("no training group has both a gold passage and a negative")
    encoder = library_model(
        CrossEncoder,
        recipe.model,
        "cross-encoder",
        resolve(recipe.model),
        "; train one with `ifqa train reranker` or give a hub id",
        ("config.json",),
        max_length=recipe.max_length,
        num_labels=1,
        config_kwargs={"attention_probs_dropout_prob": recipe.attention_dropout},
    )
    model, tokenizer = encoder.model, encoder.tokenizer
    if not hasattr(type(model.config)(), "attention_probs_dropout_prob"):  # an override only adds the key
        log.warning("%s has no attention_probs_dropout_prob; --attention-dropout has no effect", recipe.model)
    steps = planned_steps(groups, recipe, recipe.group_size, recipe.other_gold)

    def prepare(step) -> dict:
        """This rank's share of a step, tokenized (ahead, by worker processes, on CUDA)."""
        share = world.share(step, PER_STEP)
        questions = [q for q, passages in share for _ in passages]
        passages = [p for _, passages in share for p in passages]
        inputs = pair_inputs(tokenizer, questions, passages, recipe.max_length, padding=True, return_tensors="pt")
        return {**inputs, "groups": [len(passages) for _, passages in share]}

    def loss_of(inputs: dict, forward) -> torch.Tensor:
        groups = inputs.pop("groups")
        logits = forward(**inputs).logits.float().view(-1)
        return torch.stack([torch.logsumexp(scores, 0) - scores[0] for scores in logits.split(groups)]).mean()

    def save_model(folder: Path) -> None:
        model.eval()
        with atomic_dir(folder / "model") as tmp:
            encoder.save(str(tmp))

    return Trainee(
        model=model,
        parameters=list(model.parameters()),
        batches=steps,
        prepare=prepare,
        loss=loss_of,
        save=save_model,
        memory=(f"a step of {recipe.questions_per_step} questions", PER_STEP),
    )
