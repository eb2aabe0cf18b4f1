"""A reader trained on a run file's questions and passages (FiD, the LLM reader), from what every such kind
shares: its run recorded beside its checkpoints and checked on resuming, dev EM on a schedule, the best model in
``best/`` and the final one in ``last/``. A kind brings a ``Reader`` and never sees the device."""

from __future__ import annotations

import dataclasses
import json
import logging
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from ifqa import distributed
from ifqa.artifacts import read_run, recorded_questions
from ifqa.devices import numerics, pick_precision
from ifqa.distributed import World
from ifqa.errors import IfqaError
from ifqa.eval.answers import best_over_answers, exact_match, normalize_answer
from ifqa.io import settled, write_json
from ifqa.training.loop import (
    RESULT,
    RUN_CONFIG,
    STATE,
    TRAINER,
    Evaluation,
    Invocation,
    LoopSettings,
    Trainee,
    compiles,
    run_loop,
    start,
)

log = logging.getLogger(__name__)


@dataclass(kw_only=True)
class Reader(Trainee):
    """A kind's trainee, its model loaded: ``prepare(g)`` is micro-batch g's inputs; ``predict(records)`` answers
    dev records (training mode after); ``checkpoint(folder, **facts)`` writes a folder whole, its step and dev EM
    among the facts. ``train_reader`` gives it its micro-batches, dev EM and final save."""

    batches: Sequence = ()
    predict: Callable[[Sequence[dict]], list[str]]
    checkpoint: Callable[..., None]


@dataclass(frozen=True)
class Launch:
    """How this rank trains, as a kind's ``load`` sees it (it loads the model on the CPU; the loop moves it)."""

    world: World
    precision: str
    compiled: bool = False


@dataclass(frozen=True)
class RunFiles:
    """The run files a reader trains on and is scored on, and their records as kept."""

    train_run: str | Path
    dev_run: str | Path | None
    train: list[dict]
    dev: list[dict]


@dataclass(frozen=True, kw_only=True)
class ReaderKind:
    """A reader trainable on a run file, by its parts: ``check(recipe, output)`` refuses before anything is read,
    ``keep(train, recipe, train_run)`` refuses records its batches cannot use, ``micro_batch(recipe)`` is what the
    ranks share, ``load(recipe, launch, files)`` its ``Reader``; ``batch_per_rank``: (GPU, CPU) questions per rank
    and step without ``--batch-size``."""

    name: str
    check: Callable
    micro_batch: Callable
    load: Callable
    keep: Callable = lambda train, recipe, train_run: train
    batch_per_rank: tuple[int, int] | None = None

    def batched(self, recipe, gpu: bool, ranks: int):
        """The recipe with ``batch_per_rank`` for ``ranks`` ranks, unless it gives ``--batch-size`` (global)."""
        if not self.batch_per_rank or recipe.batch_size:
            return recipe
        return dataclasses.replace(recipe, batch_size=self.batch_per_rank[0 if gpu else 1] * ranks)

    def train(self, train_run, dev_run, output, recipe, device=None, progress=True, stop_after=None) -> dict:
        """``train_reader`` for this kind, as its module offers it (``fid.train``, ``llm.train``)."""
        return train_reader(self, recipe, train_run, dev_run, output, Invocation(device, progress, stop_after))


#: the splits a model is selected or scored on, never trained on
EVALUATION_SPLITS = ("dev", "test", "validation")
#: the share of training questions that may also be dev questions (IfQA's train and dev share 9 of 2,400, left out)
OVERLAP_REFUSED = 0.05


def held_apart(train: list[dict], dev: list[dict], train_run, dev_run) -> list[dict]:
    """The training records any kind may train on, before a model loads: a run of an evaluation split, or one
    largely the dev run, is refused; the dev run's questions are left out (dev EM picks ``best/``)."""
    if not train:
        raise IfqaError("no training questions", train_run)
    recorded = (recorded_questions(train_run) or {}).get("name", "")
    if recorded.split(":")[-1] in EVALUATION_SPLITS:
        raise IfqaError(f"is a run of {recorded}; train on a train split and keep it for evaluation", train_run)
    scored = {normalize_answer(r["question"]) for r in dev}
    kept = [r for r in train if normalize_answer(r["question"]) not in scored]
    if len(train) - len(kept) > OVERLAP_REFUSED * len(train):
        raise IfqaError(
            f"{len(train) - len(kept)} of its {len(train)} questions are questions of --dev-run {dev_run}, whose EM "
            "would then be scored on training questions; train on another split",
            train_run,
        )
    if len(kept) < len(train):
        log.info("%d training question(s) are also dev questions: left out of training", len(train) - len(kept))
    return kept


def identity(kind: ReaderKind, recipe, fields: dict | None = None) -> dict:
    """What a run is: its kind and every recipe field (``fields``: as a record holds them) but those that
    change only speed and memory."""
    fields = dataclasses.asdict(recipe) if fields is None else fields
    return {"kind": kind.name, **{k: v for k, v in fields.items() if k not in recipe.HOW_NOT_WHAT}}


def _recorded(saved: dict, recipe) -> dict:
    """A run record of an earlier ifqa as this one reads it: renamed settings (FiD's fp32) under their new names,
    later ones at their defaults, how it was launched left out."""
    saved = {k: v for k, v in saved.items() if k != "launch"}  # how it was launched: it may move between worlds
    for old, (new, values) in type(recipe).RENAMED.items():
        if old in saved:
            saved[new] = values[saved.pop(old)]
    defaults = dataclasses.asdict(type(recipe)())
    return {**{k: v for k, v in defaults.items() if k not in saved}, **saved}


def resumes(output: Path, kind: ReaderKind, recipe) -> bool:
    """Whether ``output`` holds this run to resume (another run there is refused in one line)."""
    recorded = output / RUN_CONFIG
    if recorded.is_file():
        try:
            saved = json.loads(recorded.read_text(encoding="utf-8"))
        except ValueError:
            raise IfqaError(f"{RUN_CONFIG} is not readable JSON; train into a new --output", output) from None
        if saved.get("kind", "fid") != kind.name:  # FiD's records of earlier versions name no kind
            raise IfqaError("holds another kind of training run; train into a new --output", output)
        if identity(kind, recipe, _recorded(saved, recipe)) != identity(kind, recipe):
            raise IfqaError(
                "holds a run with other settings; use the same options, or train into a new --output", output
            )
        return True
    if (settled(output / STATE) / TRAINER).exists() or (output / RESULT).exists():
        raise IfqaError(f"holds a training state without its {RUN_CONFIG}; train into a new --output", output)
    return False  # a folder holding what the command did not write is the output guard's (cli/options.py)


def rank_rows(world: World, labels) -> tuple[slice, dict]:
    """This rank's rows of a global batch whose answer tokens ``labels`` marks (-100: none), and the whole batch's
    token count for ``token_mean`` (none on one rank, which takes every row)."""
    if not world.active:
        return slice(None), {}
    rows = world.share(range(len(labels)))
    return slice(rows[0], rows[-1] + 1), {"global_tokens": (labels != -100).sum()}


def token_mean(total, labels, global_tokens=None, ranks: int = 1):
    """``total``, a sum over the answer tokens ``labels`` marks, as a mean: over this rank's tokens on one
    rank; under several, over the global batch's (``rank_rows``) times the ranks, whose gradients
    DistributedDataParallel averages, so a step is the one a single process takes over the whole batch."""
    counted = (labels != -100).sum() if global_tokens is None else global_tokens.to(labels.device) / ranks
    return total / counted.clamp(min=1)


def run_steps(recipe, questions: int) -> int:
    """A run's optimizer steps: ``--steps``, else ``--epochs`` passes over its ``questions``."""
    return recipe.steps or max(1, math.ceil(recipe.epochs * questions / recipe.batch_size))


class DevEM(Evaluation):
    """Dev EM every ``eval_every`` steps and at the last, each rank predicting its share; a better EM saves
    ``best/`` and then the state, whose best EM then agrees with ``best/`` on resuming."""

    def __init__(self, reader: Reader, records: list[dict], recipe, steps: int, world: World, output: Path):
        self.reader, self.recipe, self.steps, self.world, self.output = reader, recipe, steps, world, output
        self.records = records[: recipe.dev_questions] if recipe.dev_questions else records
        self.best_em, self.last_em = -1.0, None

    def after_step(self, step: int, entry: dict) -> bool:
        if not self.records or (step % self.recipe.eval_every and step != self.steps):
            return False
        share = self.world.blocks(len(self.records), self.recipe.eval_batch_size)
        mine = self.reader.predict(self.records[share.start : share.stop])
        predictions = distributed.gather_objects(mine, self.world)
        right = sum(best_over_answers(exact_match, p, r["answers"]) for p, r in zip(predictions, self.records))
        entry["dev_em"] = self.last_em = round(100.0 * right / len(self.records), 2)
        if entry["dev_em"] > self.best_em:
            self.best_em = entry["dev_em"]
            with distributed.one_writer(self.world) as writes:
                if writes:
                    self.reader.checkpoint(self.output / "best", step=step, dev_em=entry["dev_em"])
        return True

    def state(self) -> dict:
        return {"best_em": self.best_em}

    def restore(self, saved: dict) -> None:
        best = saved.get("best_em", -1.0)
        if not isinstance(best, (int, float)):
            raise TypeError("its 'best_em' is not a number")
        self.best_em = float(best)


def train_reader(kind: ReaderKind, recipe, train_run, dev_run, output, run: Invocation) -> dict:
    """Train ``kind``'s reader on a run file (a rerun resumes); returns the record (``step``, ``log``, ``best_em``)."""
    output = settled(Path(output))
    kind.check(recipe, output)
    resuming = resumes(output, kind, recipe)
    world, device = start(recipe.seed, run.device)
    recipe = kind.batched(recipe, device.is_cuda, world.size)
    world.share(range(kind.micro_batch(recipe)))  # a batch the ranks cannot share: one line, now
    launch = Launch(world, pick_precision(recipe.precision, device, "train"), compiles(recipe, device))
    train_records, dev_records = read_run(train_run), read_run(dev_run) if dev_run else []
    train_records = kind.keep(held_apart(train_records, dev_records, train_run, dev_run), recipe, train_run)
    steps = run_steps(recipe, len(train_records))
    if world.active:  # the group forms before anything is written: a peer that never comes leaves nothing
        distributed.start(device)
    files = RunFiles(train_run, dev_run, train_records, dev_records)
    reader = kind.load(recipe, launch, files)
    if not resuming and world.main:  # written once the model loads: a model that cannot leaves nothing
        launched = {  # how this run was trained: the world, its batches and what decided the last digits
            "world_size": world.size,
            "global_batch": recipe.batch_size,
            "batch_per_rank": recipe.batch_size // world.size,
            "numerics": numerics(device, launch.precision),
        }
        write_json(output / RUN_CONFIG, {**identity(kind, recipe), "launch": launched})
    dev = DevEM(reader, dev_records, recipe, steps, world, output)

    def save(folder: Path) -> None:
        reader.checkpoint(folder / "last", step=steps, dev_em=dev.last_em)
        if not dev.records:
            reader.checkpoint(folder / "best", step=steps, dev_em=None)

    trainee = dataclasses.replace(reader, batches=range(steps * recipe.accumulation), evaluation=dev, save=save)
    warmup = recipe.warmup_steps if recipe.warmup_steps is not None else max(1, steps // 20)  # 5% by default
    settings = LoopSettings.of(recipe, steps, warmup_steps=warmup, compile=launch.compiled)
    return run_loop(trainee, output, settings, device, run.progress, run.stop_after, world)
