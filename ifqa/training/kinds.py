"""What ifqa can train, one entry each (``registry.TRAINABLE``): ``ifqa train NAME`` and an experiment's
``train`` stage are made from an entry, so a new kind is one module and one registry line. Heavy modules are
imported by an entry's ``train`` alone."""

from __future__ import annotations

import importlib
import inspect
from dataclasses import dataclass
from pathlib import Path

from ifqa.training import recipes
from ifqa.training.loop import Invocation


@dataclass(frozen=True)
class TrainJob:
    """One training job: ``train_run``/``dev_run`` for run kinds, ``source`` (a ``QuestionSource``), ``corpus`` and
    ``dev_run`` for mined kinds."""

    kind: str
    output: Path
    run: Invocation = Invocation()
    train_run: str | None = None
    dev_run: str | None = None
    source: object = None
    corpus: str | None = None


def _target(target: str):
    module, _, attribute = target.partition(":")
    return getattr(importlib.import_module(module), attribute)


def stopped(output, record: dict) -> str:
    """What every kind says of a run stopped before its last step (``--stop-after``, an interrupt)."""
    return f"{output}: stopped at step {record['step']} of {record['steps']}; rerun the same command to continue"


@dataclass(frozen=True, kw_only=True)
class _Kind:
    """An entry: its ``recipe`` (the command's options), what it trains from (``inputs``), the output folder a
    reader or retriever loads (``artifact``), ``train(recipe, job)`` and ``summary``."""

    recipe: type

    def __post_init__(self) -> None:
        doc = self.recipe.__doc__ or ""
        if not doc.strip() or doc.startswith(f"{self.recipe.__name__}("):  # none, or the one dataclass writes
            raise TypeError(f"{self.recipe.__name__} has no docstring, whose first paragraph is the command's help")

    @property
    def help(self) -> str:
        """The command's help: what its recipe's docstring says first (one place describes a kind)."""
        return inspect.cleandoc(self.recipe.__doc__).split("\n\n")[0].replace("\n", " ")


@dataclass(frozen=True, kw_only=True)
class RunKind(_Kind):
    """A reader trained on a run file; ``reader``: ``"module:attribute"`` of its ``runs.ReaderKind``."""

    reader: str
    inputs = "run"
    artifact = "best"

    def train(self, recipe, job: TrainJob) -> dict:
        from ifqa.training.runs import train_reader  # the loop and torch, for a job of this kind alone

        return train_reader(_target(self.reader), recipe, job.train_run, job.dev_run, job.output, job.run)

    def summary(self, output, record: dict) -> str:
        if not record["finished"]:
            return stopped(output, record)
        last = record["log"][-1] if record["log"] else {}
        best = record.get("best_em", -1)
        scored = f", best dev EM {best:.2f}" if best is not None and best >= 0 else ""
        return f"{output}: step {record['step']}, last loss {last.get('loss')}{scored}"


@dataclass(frozen=True, kw_only=True)
class MinedKind(_Kind):
    """A retrieval model trained on questions with negatives mined from an index (``jobs.py``): ``trainer`` makes
    its trainee (None: fitted in one process, the control); ``reranks_dev``: dev scores its reranked dev run."""

    trainer: str | None
    reranks_dev: bool = False
    inputs = "questions"
    artifact = "model"

    def load_trainer(self):
        """This kind's trainee (its module imports torch): ``(groups, recipe, world, device) -> loop.Trainee``."""
        return _target(self.trainer)

    def train(self, recipe, job: TrainJob) -> dict:
        from ifqa.training.jobs import train_job  # mining and training, for a job of this kind alone

        return train_job(recipe, job)

    def summary(self, output, card: dict) -> str:
        if not card.get("finished"):
            return stopped(output, card)
        if "classifier" in card:
            return f"{output}/model: passage classifier, held-out AUC {card['classifier']['held_out_auc']:.3f}"
        dev = card.get("dev") or {}
        scores = "  ".join(
            f"{name} R@1 {v['gold_recall']['1']:.1f} R@5 {v['gold_recall']['5']:.1f}" for name, v in dev.items()
        )
        return f"{output}/model: trained in {card['train_seconds']:.0f} s" + (f"; dev {scores}" if scores else "")


FID = RunKind(recipe=recipes.FiDRecipe, reader="ifqa.training.fid:KIND")
LLM = RunKind(recipe=recipes.LLMRecipe, reader="ifqa.training.llm:KIND")
RERANKER = MinedKind(recipe=recipes.RerankerRecipe, trainer="ifqa.training.reranker:trainee", reranks_dev=True)
RETRIEVER = MinedKind(recipe=recipes.RetrieverRecipe, trainer="ifqa.training.retriever:trainee")
CONTROL = MinedKind(recipe=recipes.ControlRecipe, trainer=None)
