"""An experiment config as an object: what the notebooks (and anyone scripting an experiment) use
instead of the loaded dictionary's internals."""

from __future__ import annotations

from pathlib import Path

from ifqa import arguments as arg
from ifqa.arguments import checked
from ifqa.artifacts import QuestionSet
from ifqa.errors import IfqaError
from ifqa.experiments.config import load_config
from ifqa.experiments.runner import question_source, run_experiment


class Experiment:
    """A loaded experiment YAML: its stages, its questions, where its stages write.

    >>> experiment = Experiment("experiments/demo.yaml")  # doctest: +SKIP
    >>> results = experiment.run(progress=False)           # doctest: +SKIP
    >>> experiment.run_file("bm25")                        # doctest: +SKIP
    PosixPath('experiments/results/demo/runs/bm25-k20.jsonl')
    """

    @checked(path=arg.path_like)
    def __init__(self, path: str | Path):
        self.path = Path(path)
        self._config = load_config(self.path)
        self.name: str = self._config["name"]
        self.k: int = self._config["k"]
        self.root = Path(self._config["_root"])
        self.output = self.root / self._config.get("output", f"results/{self.name}")

    @checked(kind=arg.optional(arg.text))
    def stages(self, kind: str | None = None) -> list[dict]:
        """The stage entries in order (copies), of one kind (``retrieve``, ``read`` ...) when given."""
        return [dict(stage) for stage in self._config["_stages"] if kind is None or stage["stage"] == kind]

    def questions(self) -> QuestionSet:
        """The questions the experiment is scored on (its ``questions:`` entry, loaded)."""
        return question_source(self._config, self._config["questions"]).load()

    @checked(force=arg.flag, progress=arg.flag)
    def run(self, force: bool = False, progress: bool = True) -> dict:
        """Every stage that is not up to date (``ifqa experiment run``); returns the results."""
        return run_experiment(self.path, force, progress)

    @checked(spec=arg.text)
    def index(self, spec: str) -> str:
        """An index a stage names: one the experiment built, a folder beside the config, or a spec."""
        if ":" in spec.split("/")[0]:
            return spec
        built = self.output / "indexes" / spec
        return str(built if built.exists() else self.root / spec)

    @checked(stage=arg.text)
    def run_file(self, stage: str) -> Path:
        """The run file a retrieve stage writes."""
        spec = self._stage("retrieve", stage)
        return self.output / "runs" / f"{stage}-k{spec.get('k', self.k)}.jsonl"

    @checked(stage=arg.text)
    def predictions_file(self, stage: str) -> Path:
        """The predictions file a read stage writes."""
        self._stage("read", stage)
        return self.output / "predictions" / f"{stage}.jsonl"

    def _stage(self, kind: str, name: str) -> dict:
        """The ``kind`` stage called ``name``; one line naming the ones there are otherwise."""
        found = [stage for stage in self.stages(kind) if stage["name"] == name]
        if not found:
            names = ", ".join(repr(stage["name"]) for stage in self.stages(kind)) or "none"
            raise IfqaError(f"no {kind} stage named {name!r} (its {kind} stages: {names})", self.path)
        return found[0]
