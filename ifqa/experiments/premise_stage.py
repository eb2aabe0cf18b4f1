"""The premise analysis as an experiment stage: ``{stage: premise, name, predictions: READ_STAGE}``
runs ``ifqa analyze premise`` on an earlier read stage's predictions (the same model answers each
question's factual twin closed-book), so one ``ifqa experiment run`` gives each reader's correct /
memory / other shares and its memorization ratio beside its EM."""

from __future__ import annotations

import logging
from pathlib import Path

from ifqa.analysis.premise import analyze
from ifqa.errors import IfqaError
from ifqa.experiments.runner import stage_key
from ifqa.experiments.stages import Stage, earlier
from ifqa.io import read_json

log = logging.getLogger(__name__)


class PremiseStage(Stage):
    """``predictions``: an earlier read stage; ``twins``: ``rule`` (default), ``llm`` or a twins file."""

    KEYS = Stage.KEYS | {"predictions", "twins"}

    @classmethod
    def check(cls, spec: dict, names: dict[str, str], path: Path) -> None:
        super().check(spec, names, path)
        earlier(spec, "predictions", names, ("read",), path)
        if not isinstance(spec.get("twins", "rule"), str):
            raise IfqaError(f"premise stage {spec['name']!r}: twins is rule, llm or a file of twins", path)

    def run(self, context, spec: dict) -> None:
        predictions = context.output / "predictions" / f"{spec['predictions']}.jsonl"
        twins = spec.get("twins", "rule")
        if twins not in ("rule", "llm"):
            twins = context.resolve(twins)
        folder = context.output / "premise" / spec["name"]
        key = stage_key({"twins": str(twins), "questions": context.questions_key}, [predictions])
        if not context.up_to_date(folder / "premise.json", key):
            log.info("premise: %s", spec["name"])
            analyze(predictions, context.questions, folder, twins, progress=context.progress)
            context.mark(folder / "premise.json", key, {"predictions": spec["predictions"], "twins": str(twins)})
        report = read_json(folder / "premise.json")
        entry = {"name": spec["name"], "predictions": spec["predictions"], **report["all"]}
        context.results.setdefault("premise", []).append({**entry, "no_premise": report["no_premise"]["n"]})
