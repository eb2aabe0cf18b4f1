"""Training groups: a question, its gold passages and hard negatives mined from a collection.

Negatives are the first-stage retriever's top passages that the gold rule (``GoldMatcher``) does
not match, so an earlier revision of a gold passage is never taught as wrong, plus gold passages
of other questions, so that "looks like an IfQA gold passage" is not a usable cue.
"""

from __future__ import annotations

import json
import logging
import random
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Sequence

from ifqa.artifacts import Example
from ifqa.errors import IfqaError
from ifqa.eval.passages import GoldMatcher

log = logging.getLogger(__name__)


def passage_text(passage: dict) -> str:
    """What learned components read of a passage: its text, never its title (gold passages have none)."""
    return passage["text"]


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
        raise IfqaError(f"{where}: {len(missing)} of {len(examples)} training questions have no gold passage "
                        f"(first: {missing[0].qid!r}); training needs the 'context' field")


def mine_groups(examples: Sequence[Example], pipeline, depth: int = 30, other_gold: int = 1,
                seed: int = 0, progress: bool = True) -> list[TrainingGroup]:
    """For each question, up to ``depth`` retrieved non-gold passages plus ``other_gold`` gold passages
    of other questions (in the retriever's order; sampling happens at training time)."""
    from tqdm import tqdm

    check_has_gold(examples, "training data")
    rng = random.Random(seed)
    pool = sorted({text for e in examples for text in e.context if text.strip()})
    groups: list[TrainingGroup] = []
    size = 64
    with tqdm(total=len(examples), desc="mine negatives", unit="q", disable=not progress) as bar:
        for start in range(0, len(examples), size):
            batch = examples[start : start + size]
            for example, hits in zip(batch, pipeline.search([e.question for e in batch])):
                matcher = GoldMatcher(example.context)
                negatives = []
                for position, _ in hits[:depth]:
                    text = passage_text(pipeline.passages[position])
                    if not matcher.matches(text):
                        negatives.append(text)
                others = []
                while len(others) < other_gold and len(pool) > len(example.context):
                    text = rng.choice(pool)
                    if not matcher.matches(text) and text not in others:
                        others.append(text)
                positives = [text for text in example.context if text.strip()]
                groups.append(TrainingGroup(example.qid, example.question, positives, negatives, others))
            bar.update(len(batch))
    return groups


def write_groups(groups: Sequence[TrainingGroup], path: str | Path) -> None:
    from ifqa.io import atomic_write

    with atomic_write(path) as handle:
        for group in groups:
            handle.write(json.dumps(asdict(group), ensure_ascii=False) + "\n")


def read_groups(path: str | Path) -> list[TrainingGroup]:
    groups = []
    with open(path, encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            try:
                groups.append(TrainingGroup(**json.loads(line)))
            except (ValueError, TypeError) as exc:
                raise IfqaError(f"not a training group ({exc})", path, number) from None
    return groups


def plan_steps(groups: Sequence[TrainingGroup], epochs: int, questions_per_step: int, seed: int, group_size: int,
               hard_depth: int, other_gold: int = 0) -> list[list[tuple[str, list[str]]]]:
    """Every step's (question, [gold, other gold..., mined negative...]) groups, fixed by the seed:
    ``group_size`` passages per question, mined negatives sampled from the first ``hard_depth``."""
    rng = random.Random(seed)
    steps = []
    for _ in range(epochs):
        order = list(groups)
        rng.shuffle(order)
        for start in range(0, len(order) - questions_per_step + 1, questions_per_step):
            batch = []
            for group in order[start : start + questions_per_step]:
                others = group.other_gold[:other_gold]
                pool = group.negatives[:hard_depth]
                hard = rng.sample(pool, min(group_size - 1 - len(others), len(pool)))
                batch.append((group.question, [rng.choice(group.positives)] + others + hard))
            steps.append(batch)
    return steps
