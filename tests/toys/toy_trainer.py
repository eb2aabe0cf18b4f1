"""A toy trainable kind: what a new kind needs (a recipe, its inputs, the folder it writes, ``train`` and
``summary``). It "trains" the run's most frequent answer into ``best/answer.txt``."""

import collections
from dataclasses import dataclass

from ifqa.artifacts import read_run
from ifqa.configs import option
from ifqa.io import write_json


@dataclass(frozen=True)
class ToyRecipe:
    shout: bool = option(False, "Write the answer in capitals.")


class ToyKind:
    recipe = ToyRecipe
    inputs = "run"
    artifact = "best"
    help = "Learn the most frequent answer of a run."

    def train(self, recipe, job):
        answers = collections.Counter(a for r in read_run(job.train_run) for a in r["answers"][:1])
        answer = answers.most_common(1)[0][0]
        (job.output / "best").mkdir(parents=True, exist_ok=True)
        (job.output / "best" / "answer.txt").write_text(answer.upper() if recipe.shout else answer)
        write_json(job.output / "best" / "ifqa_card.json", {"kind": "toy", "answer": answer})
        return {"finished": True, "answer": answer}

    def summary(self, output, record):
        return f"{output}: learned {record['answer']!r}"


TOY = ToyKind()
