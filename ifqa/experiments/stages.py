"""The experiment stage types: retrieve (a retrieval pipeline -> a run and its recall), read (any
registered reader -> predictions and EM/F1) and evaluate (score a file made elsewhere).

A stage type is a class with ``KEYS``, ``check(spec, names, path)`` and ``run(context, spec)``,
registered in ``ifqa.registry.STAGES``; adding one needs no change to the runner.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
from pathlib import Path
from typing import Any

from ifqa.api import Pipeline
from ifqa.artifacts import check_questions, read_predictions, read_run
from ifqa.cards import add_dev_scores, read_card
from ifqa.configs import accepted_keys, field_default, from_options, option_fields
from ifqa.datasets import QuestionSource
from ifqa.errors import IfqaError
from ifqa.eval.judged import read_judgments, summarize_judgments
from ifqa.eval.significance import bootstrap_ci, paired_test
from ifqa.eval.summary import gold_hits_at, summarize_run
from ifqa.eval.tasks import task_for
from ifqa.experiments.config import SWITCH_WORDS
from ifqa.experiments.runner import question_source, stage_key
from ifqa.judge.config import JudgeConfig
from ifqa.judge.run import judge, load_prompt
from ifqa.llm.trained import default_backend
from ifqa.model_options import ModelOptions
from ifqa.readers import ReadJob, reader_command
from ifqa.registry import READERS
from ifqa.retrieval.config import RetrievalConfig
from ifqa.retrieval.specs import index_manifest

log = logging.getLogger(__name__)


def typed(spec: dict, key: str, kind: type | tuple, path: Path, minimum: int | None = None) -> Any:
    """``spec[key]`` when absent or of ``kind`` (never a bool standing for a number; a whole number
    of at least ``minimum``), else one line naming the stage and key."""
    value = spec.get(key)
    kinds = kind if isinstance(kind, tuple) else (kind,)
    wrong = value is not None and (not isinstance(value, kinds) or (isinstance(value, bool) and bool not in kinds))
    if not wrong and minimum is not None and value is not None and value < minimum:
        wrong = True
    if wrong:
        wanted = " or ".join(k.__name__ for k in kinds).replace("str", "a string").replace("int", "a whole number")
        floor = f" of at least {minimum}" if minimum is not None else ""
        raise IfqaError(
            f"{spec['stage']} stage {spec['name']!r}: '{key}' must be {wanted}{floor}, got {value!r}"[:240], path
        )
    return value


def earlier(
    spec: dict, key: str, names: dict[str, str], kinds: tuple[str, ...], path: Path, stage_only: bool = True
) -> None:
    """``spec[key]`` names an earlier stage of one of ``kinds`` (with ``stage_only`` False it may be
    a folder, spec or hub id instead, but a stage it names must still be of the right kind)."""
    value = spec.get(key)
    if value is None and not stage_only:
        return
    if value in names and names[value] in kinds:
        return
    if isinstance(value, str) and value and not stage_only and value not in names:
        return
    what = f"an earlier {' or '.join(kinds)} stage"
    found = f" ({'an' if names[value][0] in 'aeiou' else 'a'} {names[value]} stage)" if value in names else ""
    raise IfqaError(
        f"{spec['stage']} stage {spec['name']!r}: '{key}' must name {what}, got {value!r}{found}"[:240], path
    )


class Stage:
    KEYS: frozenset[str] = frozenset({"stage", "name", "enabled"})

    @classmethod
    def check(cls, spec: dict, names: dict[str, str], path: Path) -> None:
        """``names``: the earlier stages' names and types (a stage may only use what ran before it)."""
        unknown = set(spec) - cls.KEYS
        if unknown:
            raise IfqaError(
                f"{spec['stage']} stage {spec['name']!r}: unknown key(s) {', '.join(sorted(unknown))}", path
            )
        switch = spec.get("enabled", True)  # a bool, or a word from the environment: enabled: "${IFQA_DENSE:-yes}"
        if not isinstance(switch, bool) and (
            isinstance(switch, (list, dict)) or str(switch).strip().lower() not in SWITCH_WORDS
        ):
            raise IfqaError(
                f"{spec['stage']} stage {spec['name']!r}: 'enabled' must be true or false (or yes, no, on, "
                f"off, 1, 0), got {switch!r}"[:240],
                path,
            )

    def run(self, context, spec: dict) -> None:
        raise NotImplementedError


#: Settings that change how a run is made, not which passages it holds: left out of its staleness key.
HOW_NOT_WHAT = {"device", "threads", "batch_size", "corpus", "verify_corpus"} | {
    "rewrite_" + name for name in ModelOptions.OPERATIONAL
}


class RetrieveStage(Stage):
    """Every ``RetrievalConfig`` field is a key (as it is an option of ``ifqa retrieve``), plus
    ``compare_to`` (an earlier retrieve stage to test against)."""

    KEYS = Stage.KEYS | accepted_keys(RetrievalConfig) | {"compare_to"}

    @classmethod
    def check(cls, spec: dict, names: dict[str, str], path: Path) -> None:
        super().check(spec, names, path)
        if not isinstance(spec.get("indexes"), list) or not spec["indexes"]:
            raise IfqaError(f"retrieve stage {spec['name']!r} needs 'indexes': a list of index folders or specs", path)
        for index in spec["indexes"]:  # folders, specs, or earlier index stages
            earlier({**spec, "indexes": index}, "indexes", names, ("index",), path, stage_only=False)
        for field in option_fields(RetrievalConfig):
            if field.metadata.get("stage_output") and field.name != "indexes":
                earlier(spec, field.name, names, ("train",), path, stage_only=False)
        if spec.get("compare_to") is not None:
            earlier(spec, "compare_to", names, ("retrieve",), path)
        # every value as `ifqa retrieve` checks it (types, ranges, modes), before any stage runs
        retrieval_config(spec, lambda value: value, 20, f"{path}: retrieve stage {spec['name']!r}")

    def run(self, context, spec: dict) -> None:
        config = retrieval_config(spec, context.resolve, context.config["k"])
        target = context.output / "runs" / f"{spec['name']}-k{config.k}.jsonl"
        manifests = [index_manifest(i) for i in config.indexes]  # enough to tell whether the run is stale
        params = {
            "indexes": [m.get("corpus", {}).get("sha256") for m in manifests],
            "index_params": [m.get("params") for m in manifests],
            "k": config.k,
            "fusion": config.fusion,
            "weights": config.weights,
            "questions": context.questions_key,
        }
        if config.query_mode != "question":
            params["query_mode"] = config.query_mode
        if config.rerank:
            params.update(rerank=_model_identity(config.rerank), rerank_depth=config.rerank_depth)
        if config.query_encoder:
            params.update(query_encoder=_model_identity(config.query_encoder), query_encoder_path=config.query_encoder)
        if config.rewrite_model:
            params["rewrite"] = [config.rewrite_backend or default_backend(config.rewrite_model), config.rewrite_model]
        covered = {*params, "indexes", "rerank", "rerank_depth", "query_encoder", "rewrite_model", "rewrite_backend"}
        # any other setting that changes the passages, when not at its default
        for field in option_fields(RetrievalConfig):
            value = getattr(config, field.name)
            if field.name not in covered | HOW_NOT_WHAT and value != field_default(field):
                params[field.name] = value
        key = stage_key(params, [])
        if not context.up_to_date(target, key):
            log.info("retrieve: %s", spec["name"])
            Pipeline(config).run_to_file(context.questions, target, context.progress)
            context.mark(target, key, params)
        else:
            log.info("retrieve: %s is up to date", spec["name"])
        context.runs[spec["name"]] = target
        records = read_run(target)
        report = summarize_run(records, context.questions.examples)
        row = {
            "name": spec["name"],
            "indexes": spec["indexes"],
            **report,
            **gold_uncertainty(context, spec, records, config.k),
        }
        context.results["retrievers"].append(row)
        if config.rerank and context.questions.name.endswith(":dev"):
            add_dev_scores(config.rerank, spec["name"], context.questions.describe(), report["recall"]["gold"])


def retrieval_config(spec: dict, resolve, k: int, where: str | None = None):
    """A retrieve stage's ``RetrievalConfig``, checked as ``ifqa retrieve`` checks its options
    (``resolve``: stage names to their outputs; ``k``: the experiment's default; ``where``: the
    stage, for errors)."""
    outputs = {f.name for f in option_fields(RetrievalConfig) if f.metadata.get("stage_output")}
    values = {}
    for key in accepted_keys(RetrievalConfig) & set(spec):  # a former name is read as its field (from_options)
        value = spec[key]
        if key in outputs:
            value = [resolve(v) for v in value] if isinstance(value, list) else resolve(value)
        values[key] = value
    values.setdefault("k", k)
    return from_options(RetrievalConfig, values, where)


#: Depths at which experiments report gold-recall intervals and the paired test.
TESTED_DEPTHS = (1, 5, 20)


def gold_uncertainty(context, spec: dict, records: list, k: int) -> dict:
    """95% bootstrap intervals of gold recall@K and, with ``compare_to``, the paired permutation test
    against that earlier retrieve stage on the same questions."""
    if not any(r.get("ctxs") and all("gold" in c for c in r["ctxs"]) for r in records):
        context.gold_hits[spec["name"]] = {}  # still a stage a later one may compare_to
        return {}  # questions without gold passages have no gold recall to bound (the report leaves it out)
    depths = [d for d in TESTED_DEPTHS if d <= k]
    hits = gold_hits_at(records, depths)
    context.gold_hits[spec["name"]] = hits
    out: dict[str, Any] = {"gold_ci95": {str(k): list(bootstrap_ci(v)) for k, v in hits.items()}}
    baseline = spec.get("compare_to")
    if baseline:
        if baseline not in context.gold_hits:
            raise IfqaError(
                f"retrieve stage {spec['name']!r}: compare_to {baseline!r} is not an earlier retrieve stage",
                context.config["_path"],
            )
        other = context.gold_hits[baseline]
        out["vs"] = {"name": baseline, **{str(d): paired_test(hits[d], other[d]) for d in depths if d in other}}
    return out


def _model_identity(model: str) -> str:
    """What makes a trained model's results stale: its card (written once per training) or its name."""
    card = {k: v for k, v in read_card(model).items() if k != "dev"} if Path(model).is_dir() else {}
    return json.dumps(card, sort_keys=True) if card else model


def _reader_row(context, spec: dict, report: dict, status: str, command: str) -> dict:
    row: dict[str, Any] = {
        "name": spec["name"],
        "reader": spec.get("reader", "llm"),
        "mode": spec.get("mode"),
        "retriever": spec.get("retriever"),
        "paper": spec.get("paper"),
        "command": command,
        "status": status,
    }
    if report:
        task = task_for(context.questions)
        keys = [key for metric, _ in task.headline for key in (metric, f"{metric}_ci95")] + list(task.breakdowns)
        keys += [k for k in ("judge_accuracy", "judge_accuracy_ci95", "judge") if k in report]  # a judged reader
        row.update({k: report[k] for k in keys})
    return row


def score_predictions_file(context, path, compare: Path | None = None) -> dict:
    """The report of a predictions file, by the questions' task (EM/F1, WIQA accuracy, ROUGE-L), with
    the paired tests against ``compare`` (another predictions file) when given."""
    task = task_for(context.questions)
    return task.summarize(context.questions.examples, task.read(path), task.read(compare) if compare else None)


def judge_predictions(context, path: Path, named: Path | None = None) -> dict:
    """The experiment's judge (its ``judge:`` settings) on a predictions file: the judge's entries of
    the report, the verdicts kept beside the predictions and redone only when they or the judge change."""
    settings = context.config.get("judge")
    if not settings or not settings.get("model") or getattr(context.questions, "task", "qa") != "qa":
        return {}

    config = from_options(JudgeConfig, settings, where=f"{context.config['_path']}: judge")
    target = (named or path).with_suffix(".judgments.jsonl")
    key = stage_key(
        {"judge": dataclasses.asdict(config), "prompt": load_prompt(config.prompts_dir)[1], "q": context.questions_key},
        [path],
    )
    predictions = read_predictions(path)
    if not context.up_to_date(target, key):
        log.info("judge: %s", path.name)
        judge(config, predictions, context.questions, target, path, progress=context.progress)
        context.mark(target, key, dataclasses.asdict(config.public()))
    verdicts, described = read_judgments(target, path)
    return summarize_judgments(context.questions.examples, predictions, verdicts, described)


class ReadStage(Stage):
    """A reader's predictions and their scores; ``compare_to``: an earlier read stage to test against
    (paired permutation tests of EM, F1 and containment on the same questions)."""

    NON_CONFIG = frozenset({"stage", "name", "reader", "retriever", "paper", "compare_to"})

    @classmethod
    def check(cls, spec: dict, names: dict[str, str], path: Path) -> None:
        entry = READERS.get(typed(spec, "reader", str, path) or "llm")
        options = {k: v for k, v in spec.items() if k not in cls.NON_CONFIG}
        from_options(entry.config, options, where=f"{path}: reader {spec['name']!r}")
        if spec.get("retriever") is not None:
            earlier(spec, "retriever", names, ("retrieve",), path)
        if spec.get("compare_to") is not None:
            earlier(spec, "compare_to", names, ("read",), path)

    def run(self, context, spec: dict) -> None:
        name = spec.get("reader", "llm")
        entry = READERS.get(name)
        options = {k: v for k, v in spec.items() if k not in self.NON_CONFIG}
        for key in ("model", "checkpoint", "train", "prompts_dir", "rerank"):
            if options.get(key):
                options[key] = context.resolve(options[key])
        if isinstance(options.get("indexes"), list):  # an iterative reader's indexes: earlier stages' too
            options["indexes"] = [context.resolve(i) for i in options["indexes"]]
        train = context.config.get("train")
        source = context.source
        if train and "file" in train and "train" in {f.name for f in dataclasses.fields(entry.config)}:
            options.setdefault("train", question_source(context.config, train).file)  # llm, majority ...
        elif train:
            source = QuestionSource(train.get("setting"), None, source.file, source.data_dir)
        config = from_options(entry.config, options, where=f"{context.config['_path']}: reader {spec['name']!r}")
        run = context.runs.get(spec.get("retriever")) if spec.get("retriever") else None
        public = config.public() if hasattr(config, "public") else config  # no credentials in results
        needs = entry.model_key  # None: the reader needs no model (majority class)
        shown = public if not needs or getattr(config, needs) else dataclasses.replace(public, **{needs: needs.upper()})
        command = reader_command(name, shown, source, os.path.relpath(run) if run else None)
        target = context.output / "predictions" / f"{spec['name']}.jsonl"
        if needs and not getattr(config, needs):
            context.results["readers"].append(
                _reader_row(context, spec, {}, f"skipped: no {needs} configured", command)
            )
            return
        params = {"reader": name, **dataclasses.asdict(config), "retriever": spec.get("retriever")}
        key = stage_key({**params, "questions": context.questions_key}, [run] if run else [])
        params = {**params, **dataclasses.asdict(public)}
        if not context.up_to_date(target, key):
            log.info("read: %s", spec["name"])
            entry.read(config, ReadJob(context.questions, source, target, run, context.progress))
            context.mark(target, key, params)
        compared = spec.get("compare_to")
        report = score_predictions_file(
            context, target, compared and context.output / "predictions" / f"{compared}.jsonl"
        )
        report.update(judge_predictions(context, target))
        row = _reader_row(context, spec, report, "ran", command)
        if compared and report.get("compare"):
            row["vs"] = {"name": compared, **{k: v for k, v in report["compare"].items() if k.endswith("_difference")}}
        context.results["readers"].append(row)


class EvaluateStage(Stage):
    """Score a predictions file or a run made elsewhere (another tool, another machine) beside the rest."""

    KEYS = Stage.KEYS | {"predictions", "run", "paper"}

    @classmethod
    def check(cls, spec: dict, names: dict[str, str], path: Path) -> None:
        super().check(spec, names, path)
        if bool(spec.get("predictions")) == bool(spec.get("run")):
            raise IfqaError(f"evaluate stage {spec['name']!r} needs exactly one of 'predictions' or 'run'", path)
        typed(spec, "predictions", str, path)
        typed(spec, "run", str, path)

    def run(self, context, spec: dict) -> None:
        path = Path(context.resolve(spec.get("predictions") or spec["run"]))
        check_questions(path, context.questions)
        if spec.get("run"):
            report = summarize_run(read_run(path), context.questions.examples)
            context.results["retrievers"].append({"name": spec["name"], "indexes": [str(path)], **report})
            return
        report = score_predictions_file(context, path)
        report.update(judge_predictions(context, path, context.output / "predictions" / f"{spec['name']}.jsonl"))
        context.results["readers"].append(
            _reader_row(context, spec, report, "ran", f"ifqa evaluate --predictions {path}")
        )
