"""`ifqa train retriever`: fine-tune a sentence-transformers bi-encoder on IfQA.

Each step encodes a batch of questions and, for each, one gold passage and ``hard_negatives``
mined passages; every question is scored against every passage of the batch (so other questions'
gold passages are in-batch negatives) and the loss is cross-entropy with temperature.
``question_side_only`` trains a copy of the encoder for questions and keeps the passage encoder
frozen, so an index built with the starting model stays valid (no re-encoding); it must be an
index built without titles (``ifqa index dense --no-titles``), the form training reads.
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Sequence
from pathlib import Path

from ifqa import distributed
from ifqa.devices import Device
from ifqa.distributed import World
from ifqa.io import atomic_dir
from ifqa.models import library_model
from ifqa.retrieval.encoders import resolve
from ifqa.training.data import PER_STEP, TrainingGroup, planned_steps
from ifqa.training.loop import Trainee
from ifqa.training.recipes import RetrieverRecipe

log = logging.getLogger(__name__)


def trainee(groups: Sequence[TrainingGroup], recipe: RetrieverRecipe, world: World, device: Device) -> Trainee:
    """The bi-encoder (its question side alone, ``question_side_only``: a frozen copy encodes passages), its steps
    and in-batch contrastive loss; its finished model is ``output/model``."""
    import torch
    import torch.nn.functional as F
    from sentence_transformers import SentenceTransformer

    model = library_model(SentenceTransformer, recipe.model, "sentence-transformers model", resolve(recipe.model))
    model.max_seq_length = recipe.max_length
    passage_model = copy.deepcopy(model).to(device).eval() if recipe.question_side_only else model
    steps = planned_steps([g for g in groups if g.positives], recipe, recipe.hard_negatives + 1)

    def embed(encoder, texts: list[str]):
        """``encoder`` (a model, or one in DistributedDataParallel) on ``texts``, tokenized as the model does."""
        features = {k: v.to(device) if hasattr(v, "to") else v for k, v in model.tokenize(texts).items()}
        return F.normalize(encoder(features)["sentence_embedding"].float(), dim=-1)

    def loss_of(batch, forward) -> torch.Tensor:
        texts, targets = [], []
        for _, passages in batch:
            targets.append(len(texts))
            texts.extend(passages)
        if recipe.question_side_only:
            questions = embed(forward, [q for q, _ in batch])
            with torch.no_grad():
                passages_ = embed(passage_model, texts)
        elif world.active:  # one forward through DistributedDataParallel a step: questions and passages together
            both = embed(forward, [q for q, _ in batch] + texts)
            questions, passages_ = both[: len(batch)], both[len(batch) :]
        else:
            questions, passages_ = embed(model, [q for q, _ in batch]), embed(model, texts)
        if world.active:  # every rank's passages are in-batch negatives, as in one process over the whole batch
            passages_, offset = distributed.gather_rows(passages_, world)
            targets = [t + offset for t in targets]
        scores = questions @ passages_.T / recipe.temperature
        return F.cross_entropy(scores, torch.tensor(targets, device=scores.device))

    def save_model(folder: Path) -> None:
        with atomic_dir(folder / "model") as tmp:
            model.save(str(tmp))

    trainable = [p for p in model.parameters() if p.requires_grad]
    return Trainee(
        model=model,
        parameters=trainable,
        batches=steps,
        prepare=lambda step: world.share(step, PER_STEP),
        loss=loss_of,
        save=save_model,
        unused_parameters=True,  # the pooler
        memory=(f"a step of {recipe.questions_per_step} questions", PER_STEP),
    )
