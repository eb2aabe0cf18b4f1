"""Experiment stages that make what retrieval needs, so an experiment can start from article files:
``collection`` (passages from Wikipedia files), ``index`` (BM25 or dense) and ``train`` (a
reranker, retriever or the question-agnostic control, on a training split only).

Each records a key of its parameters and input checksums beside its output and is skipped while
that key holds. Later stages name earlier ones by stage name (``indexes: [bm25]``, ``rerank: reranker``).
"""

from __future__ import annotations

import logging
from pathlib import Path

from ifqa.errors import IfqaError
from ifqa.experiments.stages import Stage, earlier, typed
from ifqa.registry import INDEX_BUILDERS

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
        from ifqa.corpus.build import build
        from ifqa.experiments.runner import stage_key

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


class IndexStage(Stage):
    KEYS = Stage.KEYS | {"collection", "engine", "encoder", "max_length", "titles", "index_type"}

    @classmethod
    def check(cls, spec: dict, names: dict[str, str], path: Path) -> None:
        from ifqa.retrieval.dense_search import INDEX_TYPES

        super().check(spec, names, path)
        if spec.get("engine", "bm25") not in INDEX_BUILDERS:
            raise IfqaError(f"index stage {spec['name']!r}: engine must be one of {', '.join(INDEX_BUILDERS)}", path)
        earlier(spec, "collection", names, ("collection",), path)
        typed(spec, "encoder", str, path)
        typed(spec, "max_length", int, path, minimum=1)
        typed(spec, "titles", bool, path)
        if spec.get("index_type", "flat") not in INDEX_TYPES:
            raise IfqaError(f"index stage {spec['name']!r}: 'index_type' must be one of {', '.join(INDEX_TYPES)}", path)

    def run(self, context, spec: dict) -> None:
        import shutil

        from ifqa.experiments.runner import stage_key
        from ifqa.retrieval.index import MANIFEST

        corpus = context.artifacts[spec["collection"]]
        folder = context.output / "indexes" / spec["name"]
        params = {
            "engine": spec.get("engine", "bm25"),
            "encoder": spec.get("encoder"),
            "max_length": spec.get("max_length"),
            "titles": spec.get("titles", True),
            "index_type": spec.get("index_type", "flat"),
            "collection": Path(f"{corpus}.stage.json").read_text(),
        }
        key = stage_key(params, [])
        if not context.up_to_date(folder / MANIFEST, key):
            log.info("index: %s (%s)", spec["name"], params["engine"])
            if (folder / MANIFEST).exists():
                shutil.rmtree(folder)
            settings = {**spec, "encoder": context.resolve(spec.get("encoder"))}
            INDEX_BUILDERS.get(params["engine"])(corpus, folder, settings, context.progress)
            context.mark(folder / MANIFEST, key, params)
        context.artifacts[spec["name"]] = folder


RECIPES = {"reranker": "RerankerRecipe", "retriever": "RetrieverRecipe", "control": "ControlRecipe"}


def _recipe_class(kind: str):
    from ifqa.training import recipes

    return getattr(recipes, RECIPES[kind])


class TrainStage(Stage):
    """Trains on the training split of the experiment's setting, never on the questions it evaluates."""

    KEYS = Stage.KEYS | {"kind", "index", "recipe"}

    @classmethod
    def check(cls, spec: dict, names: dict[str, str], path: Path) -> None:
        from ifqa.configs import from_options

        super().check(spec, names, path)
        if spec.get("kind") not in RECIPES:
            raise IfqaError(f"train stage {spec['name']!r}: 'kind' must be reranker, retriever or control", path)
        earlier(spec, "index", names, ("index",), path)
        recipe = typed(spec, "recipe", dict, path) or {}
        from_options(
            _recipe_class(spec["kind"]), {**recipe, "index": spec["index"]}, f"{path}: train stage {spec['name']!r}"
        )

    def run(self, context, spec: dict) -> None:
        import dataclasses

        from ifqa.cards import CARD
        from ifqa.configs import from_options
        from ifqa.experiments.runner import stage_key
        from ifqa.retrieval.index import MANIFEST
        from ifqa.training.jobs import train_job

        recipe_class = _recipe_class(spec["kind"])
        index = context.artifacts[spec["index"]]
        options = {**(spec.get("recipe") or {}), "index": str(index)}
        if "model" in options:
            options["model"] = context.resolve(options["model"])
        recipe = from_options(recipe_class, options, f"train stage {spec['name']}")
        from ifqa.experiments.runner import question_source

        train = context.config.get("train")  # the experiment's training questions, a setting or a file
        source = question_source(context.config, train) if train else context.source.train()
        if source.file and not train:
            raise IfqaError(
                f"train stage {spec['name']!r}: the experiment's questions are a file; name its training "
                "questions (train: {setting: NAME} or train: {file: FILE})",
                context.config["_path"],
            )
        folder = context.output / "models" / spec["name"]
        params = {
            "kind": spec["kind"],
            "recipe": {**dataclasses.asdict(recipe), "index": None},
            "index": (index / MANIFEST).read_text() if (index / MANIFEST).exists() else str(index),
            "train": source.name,
        }
        key = stage_key(params, [])
        card = folder / "model" / CARD
        if not context.up_to_date(card, key):
            log.info("train: %s (%s)", spec["name"], spec["kind"])
            if folder.exists():  # another recipe: its model, state and recorded result go (mined groups stay)
                import shutil

                from ifqa.training.loop import RESULT, STATE

                shutil.rmtree(folder / "model", ignore_errors=True)
                shutil.rmtree(folder / STATE, ignore_errors=True)
                (folder / RESULT).unlink(missing_ok=True)
            train_job(spec["kind"], recipe, source, folder, progress=context.progress)
            context.mark(card, key, params)
        context.artifacts[spec["name"]] = folder / "model"
