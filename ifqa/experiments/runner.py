"""`ifqa experiment run CONFIG.yaml`: run a config's stages in order, skipping those up to date.

Each stage's output carries a ``.stage.json`` with a key made of its parameters and the checksums
of its inputs; a stage whose key is unchanged is skipped, so rerunning after adding one reader runs
only that reader. The runner knows no stage type: each comes from ``ifqa.registry.STAGES``.
"""

from __future__ import annotations

import hashlib
import json
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ifqa import arguments as arg
from ifqa.arguments import checked
from ifqa.artifacts import QuestionSet
from ifqa.datasets import QuestionSource
from ifqa.experiments.config import OFF_WORDS, load_config, output_dir
from ifqa.experiments.results import write_results
from ifqa.io import file_sha256, write_json
from ifqa.outputs import check_folder_owned, check_output
from ifqa.registry import STAGES

log = logging.getLogger(__name__)


@dataclass
class ExperimentContext:
    """What stages share: the config, the questions, the outputs so far and the results being built."""

    config: dict
    output: Path
    source: QuestionSource
    questions: QuestionSet
    force: bool = False
    progress: bool = True
    runs: dict[str, Path] = field(default_factory=dict)
    artifacts: dict[str, Path] = field(default_factory=dict)  # collections, indexes, models by stage name
    gold_hits: dict[str, dict[int, list[float]]] = field(default_factory=dict)  # per-question, for paired tests
    results: dict[str, Any] = field(default_factory=dict)

    @property
    def questions_key(self) -> str:
        """Everything about the questions that can change a stage's output (answers and gold included)."""
        payload = json.dumps([e.to_json() for e in self.questions], sort_keys=True)
        return hashlib.sha256(payload.encode()).hexdigest()

    def resolve(self, value: str | None) -> str | None:
        """An earlier stage's output by its name, a path relative to the config's folder when it exists
        there; specs and hub ids stay as they are."""
        if value in self.artifacts:
            return str(self.artifacts[value])
        if not value or ":" in value.split("/")[0]:  # demo:bm25, prebuilt:NAME
            return value
        candidate = Path(self.config["_root"]) / value
        return str(candidate) if candidate.exists() else value

    def up_to_date(self, output: Path, key: str) -> bool:
        stage = Path(f"{output}.stage.json")
        return not self.force and output.exists() and stage.exists() and json.loads(stage.read_text()).get("key") == key

    def mark(self, output: Path, key: str, params: dict) -> None:
        write_json(f"{output}.stage.json", {"key": key, "params": params})


def stage_key(params: dict, inputs: list[Path]) -> str:
    payload = json.dumps({"params": params, "inputs": [file_sha256(p) for p in inputs]}, sort_keys=True, default=str)
    return hashlib.sha256(payload.encode()).hexdigest()


def enabled(spec: dict) -> bool:
    """``enabled: ${IFQA_DENSE:-yes}`` switches a stage off with no, false, off, 0 or an empty value."""
    value = spec.get("enabled", True)
    return value if isinstance(value, bool) else str(value).strip().lower() not in OFF_WORDS


def question_source(config: dict, spec: dict) -> QuestionSource:
    if "file" in spec:
        local = Path(config["_root"]) / spec["file"]
        return QuestionSource(
            file=str(local) if not Path(spec["file"]).is_absolute() and local.exists() else spec["file"]
        )
    return QuestionSource(spec.get("setting"), spec.get("split"))


def _config_or_path(name: str, value):
    return value if isinstance(value, dict) else arg.path_like(name, value)


@checked(path=_config_or_path, force=arg.flag, progress=arg.flag)
def run_experiment(path: str | Path | dict, force: bool = False, progress: bool = True) -> dict:
    """Run every stage that is not up to date; write and return the results (``path``: the config
    file, or the config ``load_config`` read from it, so it is read once)."""
    config = path if isinstance(path, dict) else load_config(path)

    # the results folder never holds (or is) the experiment's own YAML or the files its questions come from
    questions_file = (config["questions"] or {}).get("file") if isinstance(config["questions"], dict) else None
    reads = {"the experiment": config["_path"]}
    if questions_file:
        reads["questions"] = str(Path(config["_root"]) / Path(questions_file).expanduser())
    output = output_dir(config)
    check_output(output, reads, "output:")
    check_folder_owned(output, ("results.json", "**/*.stage.json"), f"{config['_path']}: output:")
    source = question_source(config, config["questions"])
    questions = source.load()
    context = ExperimentContext(config, output, source, questions, force, progress)
    context.results = {
        "name": config["name"],
        "questions": source.name,
        "n": len(questions),
        "task": questions.task,
        "retrievers": [],
        "readers": [],
        "premise": [],
    }
    for spec in config["_stages"]:
        if not enabled(spec):
            log.info("%s: skipped (enabled: %s)", spec["name"], spec.get("enabled"))
            continue
        STAGES.get(spec["stage"])().run(context, spec)
    write_results(context.output, context.results)
    return context.results
