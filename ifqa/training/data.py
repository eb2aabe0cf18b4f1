"""Training groups: a question, its gold passages and hard negatives mined from a collection.

Negatives are the first-stage retriever's top passages that the gold rule (``GoldMatcher``) does
not match, so an earlier revision of a gold passage is never taught as wrong, plus gold passages
of other questions, so that "looks like an IfQA gold passage" is not a usable cue: random ones by
default, or (``closest``) the ones nearest the question by BM25 over the training gold passages.
Random ones are off topic and rejected on topic alone; close ones make the style cue cost loss.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from ifqa.artifacts import Example
from ifqa.errors import IfqaError
from ifqa.eval.passages import GoldMatcher
from ifqa.io import read_jsonl, write_jsonl
from ifqa.retrieval.bm25 import MemoryBM25

log = logging.getLogger(__name__)

#: the option naming a mined kind's global batch, which the ranks share
PER_STEP = "--questions-per-step"


@dataclass
class TrainingGroup:
    qid: str
    question: str
    positives: list[str]
    negatives: list[str]  # mined from the collection, in the retriever's order
    other_gold: list[str]  # gold passages of other questions


def check_has_gold(examples: Sequence[Example], where: str) -> None:
    """Training needs gold passages; name the first question without one."""
    if not examples:
        raise IfqaError(f"{where}: no training questions")
    missing = [e for e in examples if not any(text.strip() for text in e.context)]
    if missing:
        raise IfqaError(
            f"{where}: {len(missing)} of {len(examples)} training questions have no gold passage "
            f"(first: {missing[0].qid!r}); training needs the 'context' field"
        )


def mine_groups(examples: Sequence[Example], pipeline, recipe, progress: bool = True) -> list[TrainingGroup]:
    """For each question, up to ``hard_depth`` retrieved non-gold passages (in the retriever's order) and
    ``other_gold`` random gold passages of other questions, or (``closest``) the ``hard_depth`` nearest, best first;
    training samples from both lists. Every question has a gold passage (``check_has_gold``)."""
    from tqdm import tqdm

    rng, depth = random.Random(recipe.seed), recipe.hard_depth
    pool = sorted({text for e in examples for text in e.context if text.strip()})
    nearest = MemoryBM25(pool) if recipe.other_gold_from == "closest" else None
    groups: list[TrainingGroup] = []
    size = 64
    with tqdm(total=len(examples), desc="mine negatives", unit="q", disable=not progress) as bar:
        for start in range(0, len(examples), size):
            batch = examples[start : start + size]
            questions = [e.question for e in batch]
            subqueries = pipeline.formulate(questions)  # once: an LLM query mode is not asked twice
            for example, queries, hits in zip(
                batch, subqueries, pipeline.batch_search(questions, subqueries=subqueries)
            ):
                matcher = GoldMatcher(example.context)
                # a passage's text, never its title: what learned components read (gold passages have none)
                negatives = [hit.text for hit in hits[:depth] if not matcher.matches(hit.text)]
                if nearest is not None:
                    others = [
                        pool[i]
                        for i in nearest.top(" ".join(queries), depth + len(example.context))
                        if not matcher.matches(pool[i])
                    ][:depth]
                else:
                    others = []
                    while len(others) < recipe.other_gold and len(pool) > len(example.context):
                        text = rng.choice(pool)
                        if not matcher.matches(text) and text not in others:
                            others.append(text)
                positives = [text for text in example.context if text.strip()]
                groups.append(TrainingGroup(example.qid, example.question, positives, negatives, others))
            bar.update(len(batch))
    return groups


def write_groups(groups: Sequence[TrainingGroup], path: str | Path) -> None:
    write_jsonl(path, map(asdict, groups))


def read_groups(path: str | Path) -> list[TrainingGroup]:
    groups = []
    for number, record in read_jsonl(path):
        try:
            groups.append(TrainingGroup(**record))
        except TypeError as exc:
            raise IfqaError(f"not a training group ({exc})", path, number) from None
    return groups


def planned_steps(groups: Sequence[TrainingGroup], recipe, group_size: int, other_gold: int = 0) -> list:
    """Every step's (question, [gold, other gold..., mined negative...]) groups, fixed by the recipe's seed:
    ``group_size`` passages per question, ``other_gold`` of them other questions' gold, each list sampled from its
    first ``hard_depth``. A plan of no step is one line."""
    rng, per_step, depth = random.Random(recipe.seed), recipe.questions_per_step, recipe.hard_depth
    steps = []
    for _ in range(recipe.epochs):
        order = list(groups)
        rng.shuffle(order)
        for start in range(0, len(order) - per_step + 1, per_step):
            batch = []
            for group in order[start : start + per_step]:
                others = group.other_gold
                if len(others) > other_gold:  # a ranked list (mined with ``closest``): sample from its head
                    others = rng.sample(others[: max(depth, other_gold)], other_gold)
                pool = group.negatives[:depth]
                hard = rng.sample(pool, min(group_size - 1 - len(others), len(pool)))
                batch.append((group.question, [rng.choice(group.positives)] + others + hard))
            steps.append(batch)
    if not steps:
        raise IfqaError(f"{len(groups)} training groups make no step of {per_step} questions")
    return steps
