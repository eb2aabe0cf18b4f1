"""A toy reader kind, trained on the shared loop (``training/runs.py``) from its parts alone: a model (one
logit per training answer), its batches, its loss, its dev answers and its save. It learns the run's most
frequent answer into ``best/answer.txt``."""

import collections
from dataclasses import dataclass

import torch

from ifqa.configs import option
from ifqa.io import atomic_dir, write_json
from ifqa.training.kinds import RunKind
from ifqa.training.recipes import run_recipe
from ifqa.training.runs import Reader, ReaderKind


@dataclass(frozen=True)
class ToyRecipe(run_recipe("ToyRunRecipe", steps=8, batch_size=2, lr=0.5)):
    """Learn the most frequent answer of a run."""

    HOW_NOT_WHAT = ()
    shout: bool = option(False, "Write the answer in capitals.")


def load(recipe, launch, files) -> Reader:
    counts = collections.Counter(r["answers"][0] for r in files.train)
    answers = sorted(counts)
    targets = torch.tensor([answers.index(r["answers"][0]) for r in files.train])
    model = torch.nn.Linear(1, len(answers))

    def checkpoint(folder, **facts):
        best = answers[int(model(torch.ones(1)).argmax())]
        with atomic_dir(folder) as tmp:
            (tmp / "answer.txt").write_text(best.upper() if recipe.shout else best)
            write_json(tmp / "ifqa_card.json", {"kind": "toy", "answer": best, **facts})

    return Reader(
        model=model,
        parameters=list(model.parameters()),
        prepare=lambda g: targets[g % len(targets) :][: recipe.batch_size],
        loss=lambda rows, forward: torch.nn.functional.cross_entropy(forward(torch.ones(len(rows), 1)), rows),
        predict=lambda records: [answers[int(model(torch.ones(1)).argmax())]] * len(records),
        checkpoint=checkpoint,
    )


TOY = RunKind(recipe=ToyRecipe, reader="tests.toys.toy_trainer:READER")
READER = ReaderKind(
    name="toy",
    check=lambda recipe, output: None,
    micro_batch=lambda r: r.batch_size,
    load=load,
)
