"""The majority-class reader: every question gets the training split's most frequent answer.

WIQA's first baseline (its paper's "Majority" row); for any dataset it is the floor a learned or
prompted reader must clear. No model, so it runs anywhere.
"""

from __future__ import annotations

import collections
from dataclasses import dataclass, field

from ifqa.artifacts import write_manifest, write_predictions
from ifqa.errors import IfqaError
from ifqa.readers import ReaderEntry


@dataclass(frozen=True)
class MajorityConfig:
    train: str | None = field(
        default=None,
        metadata={
            "help": "Question file whose most frequent answer is predicted (default: the setting's train split)."
        },
    )

    def output_name(self, label: str) -> str:
        return f"{label}-majority.jsonl"


class MajorityReaderEntry(ReaderEntry):
    """Majority class: predicts the training split's most frequent answer for every question."""

    name = "majority"
    config = MajorityConfig
    model_key = None  # needs no model

    def read(self, config: MajorityConfig, job) -> dict:
        pool = job.source.training_source(config.train)
        if pool is None:
            raise IfqaError("with --questions FILE, name the training questions: --train FILE or --setting NAME")
        train = pool.load()
        counts = collections.Counter(example.answers[0] for example in train.examples if example.answers)
        if not counts:
            raise IfqaError("the training questions have no answers to count")
        best = max(counts.values())  # the most frequent first answer; ties go to the alphabetically first
        answer = min(answer for answer, count in counts.items() if count == best)
        write_predictions(job.output, [{"qid": e.qid, "prediction": answer} for e in job.questions])
        write_manifest(job.output, job.questions, reader="majority", answer=answer, train=train.describe())
        return {}


READER = MajorityReaderEntry()
