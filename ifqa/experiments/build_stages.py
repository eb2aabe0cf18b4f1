"""Experiment stages that make what retrieval needs, so an experiment can start from article files:
``collection`` (passages from Wikipedia files), ``index`` (BM25 or dense) and ``train`` (a
reranker, retriever or the question-agnostic control, on a training split only).

Each records a key of its parameters and input checksums beside its output and is skipped while
that key holds. Later stages name earlier ones by stage name (``indexes: [bm25]``, ``rerank: reranker``).
"""

from __future__ import annotations

import dataclasses
import json
import logging
import shutil
from pathlib import Path

from ifqa.api import Pipeline
from ifqa.configs import from_options, option_fields
from ifqa.errors import IfqaError
from ifqa.experiments.runner import question_source, stage_key
from ifqa.experiments.stages import Stage, earlier, retrieval_config, typed
from ifqa.registry import ENGINES, TRAINABLE
from ifqa.retrieval.engines import INDEX_COMMANDS
from ifqa.retrieval.index import MANIFEST
from ifqa.retrieval.specs import index_manifest
from ifqa.training.kinds import TrainJob
from ifqa.training.loop import RESULT, RUN_CONFIG, STATE, Invocation

log = logging.getLogger(__name__)

#: Named collections made of the article files of a folder laid out like ../shared/data/wiki/.
COLLECTIONS = {
    "mini-wiki": ["enwiki2015_sample_articles.jsonl.gz", "ifqa_contexts.jsonl"],
    "wiki-800k": ["enwiki2015_articles.jsonl.gz", "enwiki2021_articles.jsonl.gz", "ifqa_contexts.jsonl"],
}


def _file_identity(path: Path) -> list:
    """Name, size and modification time: enough to notice a replaced input without hashing gigabytes."""
    stat = path.stat()
    return [path.name, stat.st_size, int(stat.st_mtime)]


class CollectionStage(Stage):
    KEYS = Stage.KEYS | {"preset", "wiki_dir", "inputs", "words", "workers"}

    @classmethod
    def check(cls, spec: dict, names: dict[str, str], path: Path) -> None:
        super().check(spec, names, path)
        for key in ("preset", "wiki_dir"):
            typed(spec, key, str, path)
        typed(spec, "words", int, path, minimum=1)
        typed(spec, "workers", int, path, minimum=1)
        inputs = spec.get("inputs")
        if inputs is not None and (not isinstance(inputs, list) or not all(isinstance(i, str) and i for i in inputs)):
            raise IfqaError(
                f"collection stage {spec['name']!r}: 'inputs' must be a list of files, got {inputs!r}"[:240], path
            )
        if bool(spec.get("preset")) == bool(spec.get("inputs")):
            raise IfqaError(
                f"collection stage {spec['name']!r} needs either 'preset' ({', '.join(COLLECTIONS)}) "
                "with 'wiki_dir', or 'inputs'",
                path,
            )
        if spec.get("preset") and spec["preset"] not in COLLECTIONS:
            raise IfqaError(
                f"collection stage {spec['name']!r}: unknown preset {spec['preset']!r}; choose from "
                f"{', '.join(COLLECTIONS)}",
                path,
            )

    def run(self, context, spec: dict) -> None:
        from ifqa.corpus.build import build  # the corpus builder, for a collection stage alone

        if spec.get("preset"):
            folder = Path(context.resolve(spec.get("wiki_dir") or "."))
            inputs = [folder / name for name in COLLECTIONS[spec["preset"]]]
        else:
            inputs = [Path(context.resolve(p)) for p in spec["inputs"]]
        missing = [str(p) for p in inputs if not p.exists()]
        if missing:
            raise IfqaError(
                f"collection stage {spec['name']!r}: missing input(s) {', '.join(missing)}", context.config["_path"]
            )
        target = context.output / "collections" / f"{spec['name']}.jsonl"
        params = {"inputs": [_file_identity(p) for p in inputs], "words": int(spec.get("words", 100))}
        key = stage_key(params, [])
        if not context.up_to_date(target, key):
            log.info("collection: %s from %s", spec["name"], ", ".join(p.name for p in inputs))
            build(inputs, target, params["words"], int(spec.get("workers", 2)), progress=context.progress)
            context.mark(target, key, params)
        context.artifacts[spec["name"]] = target


def stage_engine(spec: dict) -> str:
    """The registered engine an index stage names: an engine, or an ``ifqa index`` command's first
    (``bm25``, the default: bm25s; ``dense``: faiss)."""
    name = spec.get("engine", "bm25")
    return INDEX_COMMANDS[name][0] if name in INDEX_COMMANDS and name not in ENGINES else name


def stage_settings(spec: dict, path: Path | None, resolve=lambda value: value):
    """The stage's engine and its ``Settings`` from the stage's other keys (checked by the same
    ``from_options`` as ``ifqa index``'s options; ``resolve`` turns a relative model path into the
    experiment's)."""
    name = stage_engine(spec)
    if name not in ENGINES:
        choices = ", ".join([*INDEX_COMMANDS, *(n for n in ENGINES if n not in INDEX_COMMANDS)])
        raise IfqaError(f"index stage {spec['name']!r}: engine must be one of {choices}", path)
    engine = ENGINES.get(name)
    options = {key: value for key, value in spec.items() if key not in IndexStage.KEYS}
    if isinstance(options.get("encoder"), str):
        options["encoder"] = resolve(options["encoder"])
    return engine, from_options(engine.Settings, options, f"{path}: index stage {spec['name']!r}" if path else None)


class IndexStage(Stage):
    """An index of an earlier collection, built by any registered engine; its other keys are the
    engine's settings (``encoder``, ``max_length`` ... for ``faiss``; ``k1``, ``b`` for BM25)."""

    KEYS = Stage.KEYS | {"collection", "engine"}

    @classmethod
    def check(cls, spec: dict, names: dict[str, str], path: Path) -> None:
        settings_keys = {key for key in spec if key not in cls.KEYS}
        super().check({key: value for key, value in spec.items() if key not in settings_keys}, names, path)
        earlier(spec, "collection", names, ("collection",), path)
        stage_settings(spec, path)

    def run(self, context, spec: dict) -> None:
        corpus = context.artifacts[spec["collection"]]
        folder = context.output / "indexes" / spec["name"]
        engine, settings = stage_settings(spec, None, context.resolve)
        name = stage_engine(spec)
        names = {f.name for f in option_fields(engine.Settings)}
        params = {
            "engine": name,
            **{key: value for key, value in spec.items() if key in names},
            "collection": Path(f"{corpus}.stage.json").read_text(),
        }
        key = stage_key(params, [])
        if not context.up_to_date(folder / MANIFEST, key):
            log.info("index: %s (%s)", spec["name"], name)
            if (folder / MANIFEST).exists():
                shutil.rmtree(folder)
            engine.build(corpus, folder, settings, progress=context.progress)
            context.mark(folder / MANIFEST, key, params)
        context.artifacts[spec["name"]] = folder


class TrainStage(Stage):
    """Trains any registered kind (``registry.TRAINABLE``) on the training split of the experiment's
    setting, never on the questions it evaluates: a kind mined from an index names its ``index`` stage,
    a kind trained on a run names the ``retriever`` (an earlier retrieve stage) whose settings retrieve
    the training questions. Later stages name its model by the stage's name (``rerank: NAME``,
    ``checkpoint: NAME``, ``model: NAME``)."""

    KEYS = Stage.KEYS | {"kind", "index", "retriever", "recipe"}

    @classmethod
    def check(cls, spec: dict, names: dict[str, str], path: Path) -> None:
        super().check(spec, names, path)
        if spec.get("kind") not in TRAINABLE:
            raise IfqaError(f"train stage {spec['name']!r}: 'kind' must be one of {', '.join(TRAINABLE)}", path)
        kind = TRAINABLE.get(spec["kind"])
        recipe = typed(spec, "recipe", dict, path) or {}
        where = f"{path}: train stage {spec['name']!r}"
        if kind.inputs == "run":
            earlier(spec, "retriever", names, ("retrieve",), path)
            from_options(kind.recipe, recipe, where)
        else:
            earlier(spec, "index", names, ("index",), path)
            from_options(kind.recipe, {**recipe, "index": spec["index"]}, where)

    def run(self, context, spec: dict) -> None:
        kind = TRAINABLE.get(spec["kind"])
        options = dict(spec.get("recipe") or {})
        if "model" in options:
            options["model"] = context.resolve(options["model"])
        train = context.config.get("train")  # the experiment's training questions, a setting or a file
        source = question_source(context.config, train) if train else context.source.train()
        if source.file and not train:
            raise IfqaError(
                f"train stage {spec['name']!r}: the experiment's questions are a file; name its training "
                "questions (train: {setting: NAME} or train: {file: FILE})",
                context.config["_path"],
            )
        folder = context.output / "models" / spec["name"]
        if kind.inputs == "run":
            retrieve = next(s for s in context.config["_stages"] if s["name"] == spec["retriever"])
            retrieval = retrieval_config(retrieve, context.resolve, context.config["k"])
            corpora = [index_manifest(i).get("corpus") for i in retrieval.indexes]
            index = json.dumps({"corpora": corpora, "retrieval": dataclasses.asdict(retrieval)}, default=str)
        else:
            options["index"] = str(context.artifacts[spec["index"]])
            manifest = Path(options["index"]) / MANIFEST
            index = manifest.read_text() if manifest.exists() else options["index"]
        recipe = from_options(kind.recipe, options, f"train stage {spec['name']}")
        params = {
            "kind": spec["kind"],
            "recipe": {**dataclasses.asdict(recipe), "index": None},
            "index": index,
            "train": source.name,
        }
        marker = folder / kind.artifact
        if not context.up_to_date(marker, stage_key(params, [])):
            log.info("train: %s (%s)", spec["name"], spec["kind"])
            if folder.exists():  # another recipe: its training folder goes (mined groups stay)
                for name in ("model", "best", "last", STATE):
                    shutil.rmtree(folder / name, ignore_errors=True)
                for name in (RESULT, RUN_CONFIG, "train_log.jsonl", "train_run.jsonl"):
                    (folder / name).unlink(missing_ok=True)
            job = TrainJob(spec["kind"], folder, Invocation(progress=context.progress), source=source)
            if kind.inputs == "run":
                job = dataclasses.replace(job, train_run=str(folder / "train_run.jsonl"))
                Pipeline(retrieval).run_to_file(source.load(), job.train_run, context.progress)
            kind.train(recipe, job)
            context.mark(marker, stage_key(params, []), params)
        context.artifacts[spec["name"]] = marker
