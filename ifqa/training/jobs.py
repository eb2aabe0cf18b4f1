"""One training job for a learned retrieval component: check the questions, mine (or reuse) the
training groups, train (resumably), write the model card, and score a dev run when given one."""

from __future__ import annotations

import dataclasses
import json
import logging
import time
from pathlib import Path

from ifqa import distributed
from ifqa.api import Pipeline, Reranker
from ifqa.artifacts import read_run, recorded_questions
from ifqa.cards import add_dev_scores, read_card, write_card
from ifqa.datasets import QuestionSource
from ifqa.devices import pick_device, pick_precision
from ifqa.distributed import launched
from ifqa.errors import IfqaError
from ifqa.eval.summary import summarize_run
from ifqa.io import read_json, settled, write_json
from ifqa.models import check_model
from ifqa.registry import TRAINABLE
from ifqa.retrieval.encoders import resolve
from ifqa.retrieval.specs import index_manifest
from ifqa.training.control import train_control
from ifqa.training.data import PER_STEP, check_has_gold, mine_groups, read_groups, write_groups
from ifqa.training.loop import Invocation, LoopSettings, run_loop, saved_state, start
from ifqa.training.recipes import MiningRecipe
from ifqa.training.runs import EVALUATION_SPLITS
from ifqa.version import __version__

log = logging.getLogger(__name__)


def check_before_mining(kind, recipe, questions: int, output: Path, device: str | None) -> None:
    """What would stop training after minutes of mining, checked first: the device, the starting model, recipe
    values that cannot make a step, a damaged resume state."""
    world = distributed.launched()
    picked = pick_device(device, world)  # a device this machine, or this launch, cannot give: one line now
    if kind.trainer is None:  # fitted in this process, by no training loop
        if world.active:
            raise IfqaError("the question-agnostic control trains in one process; start it without a launcher")
        return

    check_model(resolve(recipe.model), "; --model takes an encoder or cross-encoder")
    saved_state(output)
    pick_precision(recipe.precision, picked, "train")
    recipe.check()
    world.share(range(recipe.questions_per_step), PER_STEP)  # a global batch the ranks cannot share: one line
    if questions < recipe.questions_per_step:
        raise IfqaError(
            f"{questions} training questions make no step of {PER_STEP} {recipe.questions_per_step}; lower it"
        )
    if world.active:  # the group forms before anything is written: a peer that never comes leaves nothing behind
        distributed.start(picked)


def _groups(recipe, questions, output: Path, corpus: str | None, progress: bool):
    """Mined groups, reused when the questions and mining settings are those already mined."""
    if not recipe.index:
        raise IfqaError("--index is needed: the collection's index that hard negatives are mined from")
    mining = {f.name: getattr(recipe, f.name) for f in dataclasses.fields(MiningRecipe)} | {"seed": recipe.seed}
    if mining["other_gold_from"] == "random":  # the default, unrecorded: groups mined before it existed stay valid
        del mining["other_gold_from"]
    identity = {"questions": questions.describe(), **mining, "index": _collection(recipe)}
    path, meta = output / "groups.jsonl", output / "groups.json"
    if path.exists() and meta.exists() and read_json(meta) == identity:
        return read_groups(path), identity
    pipeline = Pipeline(indexes=[recipe.index], k=recipe.hard_depth, query_mode=recipe.query_mode, corpus=corpus)

    main = launched().main  # every rank mines the same groups (seeded); rank 0 alone writes them
    groups = mine_groups(questions.examples, pipeline, recipe, progress and main)
    if main:
        write_groups(groups, path)
        write_json(meta, identity)
    return groups, identity


def train_job(recipe, job) -> dict:
    """Train the mined kind a ``kinds.TrainJob`` names into ``job.output/model``; returns its card (plus progress
    fields), or, where this same command already trained it to the end, its card as it is (``already``)."""
    name, source, output, run = job.kind, job.source, job.output, job.run
    split = None if source.file else source.resolved()[1]
    if split in EVALUATION_SPLITS:  # selection is done on dev, and test is held out
        raise IfqaError(f"refusing to train on the {split} split; train on 'train' and keep {split} for evaluation")
    questions = source.load()
    kind = TRAINABLE.get(name)
    done = completed_run(output, name, recipe, questions)
    if done is not None:
        return {"finished": True, "already": True, **done}
    check_has_gold(questions.examples, questions.name)
    check_before_mining(kind, recipe, len(questions), output, run.device)
    groups, mined = _groups(recipe, questions, output, job.corpus, run.progress)
    started = time.time()
    made = {  # what every card says made its model
        "ifqa": __version__,
        "kind": name,
        "recipe": dataclasses.asdict(recipe),
        "training_data": {"questions": questions.describe(), "groups": len(groups), "mining": mined},
        "seed": recipe.seed,
    }
    if kind.trainer is None:
        info = train_control(groups, output / "model", recipe.seed, recipe.weight)
        card = {**made, "classifier": info, "train_seconds": round(time.time() - started, 1)}
        write_card(output / "model", card)
        return {"finished": True, **card}
    result = train_on_loop(kind, groups, output, recipe, run)
    if not launched().main:  # the other ranks trained their share; rank 0 writes the card and scores dev
        return {**{key: result[key] for key in ("finished", "step", "steps")}, "rank": launched().rank}
    if not result["finished"]:
        return {"finished": False, "step": result["step"], "steps": result["steps"]}
    card = {
        **made,
        "base_model": recipe.model,
        "passages_read_as": "text without title (IfQA gold passages have none; every other passage has one)",
        "negatives": f"top-{recipe.hard_depth} of the first stage minus gold matches, plus "
        f"{recipe.other_gold} other questions' gold passage(s), {recipe.other_gold_from}",
        "steps": result["steps"],
        "train_seconds": round(time.time() - started, 1),
        "device": result["device"],
        "numerics": result["numerics"],
        "loss": result["history"][-3:],
        "extra": recipe.card_extra(),
    }
    model_dir = output / "model"
    write_card(model_dir, {**card, "complete": False})
    if job.dev_run:
        score_dev_run(kind.reranks_dev, model_dir, job.dev_run, source.data_dir, run)

    complete = {**read_card(model_dir), "complete": True}
    write_card(model_dir, complete)  # the run's last record: a rerun of a complete run is refused
    return {"finished": True, **complete}


def train_on_loop(kind, groups, output: Path, recipe, run: Invocation = Invocation()) -> dict:
    """Train (or resume) a mined kind's trainee on the loop, torch seeded before the kind makes its model (a new
    scoring head draws from the seed)."""
    world, device = start(recipe.seed, run.device)
    trainee = kind.load_trainer()(groups, recipe, world, device)
    settings = LoopSettings.of(recipe, len(trainee.batches))
    return run_loop(trainee, output, settings, device, run.progress, run.stop_after, world)


def completed_run(output: Path, kind: str, recipe, questions) -> dict | None:
    """The card of a complete run in ``output`` (its card's last write says so) of this command: the same kind,
    recipe, training questions and collection. A complete run of anything else is refused; a run killed before
    its last write is resumed. Cards written before completion was recorded count as complete."""
    model = settled(output / "model")
    card = read_card(model) if model.is_dir() else {}
    if not card or not card.get("complete", True):
        return None
    data = card.get("training_data") or {}
    same = (
        card.get("kind") == kind
        and card.get("recipe") == json.loads(json.dumps(dataclasses.asdict(recipe)))
        and (data.get("questions") or {}).get("id") == questions.identity
        and (data.get("mining") or {}).get("index") == _collection(recipe)
    )
    if not same:
        raise IfqaError(
            "already holds a model trained from other inputs or settings; choose another --output or delete it",
            output,
        )
    log.info("%s already holds this training run's model (same recipe and data): nothing to train", output)
    return card


def _collection(recipe) -> dict | None:
    """The collection hard negatives are mined from (its manifest's corpus record), as a card keeps it."""
    return index_manifest(recipe.index).get("corpus") if recipe.index else None


def score_dev_run(reranks: bool, model_dir: Path, dev_run: str, data_dir: str | None, run: Invocation) -> None:
    """Rerank a dev run with the new reranker and record gold recall before and after in the card."""
    recorded = recorded_questions(dev_run)
    if not recorded:
        raise IfqaError("--dev-run needs a run made by ifqa (its manifest names the question set)", dev_run)
    questions = QuestionSource.recorded(recorded, data_dir).load()
    if ":" in recorded["name"] and recorded["name"].split(":")[1] != "dev":
        raise IfqaError(f"--dev-run is a run of {recorded['name']}; dev scores must come from a dev split", dev_run)
    before = summarize_run(read_run(dev_run), questions.examples)["recall"]["gold"]
    add_dev_scores(model_dir, "first stage", questions.describe(), before)
    if not reranks:
        return

    target = model_dir.parent / "dev-reranked.jsonl"
    Reranker(model_dir, device=run.device).rerank_run(dev_run, target, questions, run.progress)
    after = summarize_run(read_run(target), questions.examples)["recall"]["gold"]
    add_dev_scores(model_dir, "reranked", questions.describe(), after)
