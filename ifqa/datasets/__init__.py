"""Question sets: the registry of datasets (``ifqa.registry.DATASETS``) and how commands name questions.

``QuestionSource`` is the one place where "which questions?" is answered: ``--questions FILE``
wins over ``--setting``/``--split``, and the defaults (the demo set's dev split) live here only.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ifqa.artifacts import QuestionSet, check_questions, recorded_questions
from ifqa.datasets.hub import is_hub, load_hub_questions
from ifqa.registry import DATASETS

DEFAULT_SETTING = "demo"


def premise_in_context(questions: QuestionSet) -> bool:
    """Whether a set states its counterfactual in each question's context (FaithEval), not in the
    question (IfQA's "If ..."): its questions are then their own factual twins."""
    named = questions.dataset or questions.name.partition(":")[0]
    return named in DATASETS and getattr(DATASETS.get(named), "premise", "question") == "context"


def task_of(entry) -> str:
    """How a dataset's answers are prompted and scored (IfQA's short answers unless it says)."""
    return getattr(entry, "task", "qa") if entry is not None else "qa"


@dataclass(frozen=True)
class QuestionSource:
    setting: str | None = None
    split: str | None = None
    file: str | None = None
    data_dir: str | None = None

    @property
    def given(self) -> bool:
        """Whether the user named questions at all (some commands can infer them instead)."""
        return bool(self.file or self.setting or self.split)

    def resolved(self) -> tuple[str, str]:
        setting = self.setting or DEFAULT_SETTING
        return setting, self.split or DATASETS.get(setting).default_split

    @property
    def name(self) -> str:
        """``demo:dev``-style name, or the file's path, as recorded in manifests."""
        return str(self.file) if self.file else ":".join(self.resolved())

    @property
    def label(self) -> str:
        """A file-name-friendly label (``demo-dev``, the file's stem, or a Hub dataset's name)."""
        if is_hub(self.file):
            return "hf-" + "".join(c if c.isalnum() or c in "-_." else "-" for c in self.file[3:].split("?")[0]).strip(
                "-"
            )
        return Path(self.file).stem if self.file else "-".join(self.resolved())

    def cli_args(self) -> str:
        """The options that name these questions on the command line."""
        if self.file:
            return f"--questions {self.file}"
        setting, split = self.resolved()
        return f"--setting {setting} --split {split}"

    def load(self, answers: bool = True) -> QuestionSet:
        """The questions; a file given with a setting is read in that dataset's format (a WIQA JSONL,
        a CausalQA CSV), a file alone in IfQA's (``answers`` False: questions without answers are
        taken too, for what needs none)."""
        entry = DATASETS.get(self.setting) if self.setting else None
        if is_hub(self.file):  # hf:OWNER/NAME or hf:PATH, read with datasets (as the setting, for a Hub one)
            return load_hub_questions(self.file, self.setting if hasattr(entry, "hub_id") else None)
        if self.file:
            if entry is not None and hasattr(entry, "load_file"):
                return QuestionSet(str(self.file), entry.load_file(self.file), task_of(entry), self.setting)
            from ifqa.datasets.ifqa import load_examples  # IfQA's own file format, for a file read as IfQA

            return QuestionSet(str(self.file), load_examples(self.file, answers), task_of(entry))
        setting, split = self.resolved()
        entry = DATASETS.get(setting)
        if hasattr(entry, "questions"):  # a Hub set: its id, revision and fingerprint go in manifests
            found = entry.questions(split)
            return QuestionSet(self.name, found.examples, found.task, hub=found.hub)
        return QuestionSet(self.name, entry.load(split, self.data_dir), task_of(entry))

    def train(self) -> QuestionSource:
        """The training split of the same setting (where demonstrations come from)."""
        return QuestionSource(self.setting or DEFAULT_SETTING, "train", None, self.data_dir)

    def training_source(self, file: str | None = None) -> QuestionSource | None:
        """Where training questions for these come from: ``file`` (read in this dataset's format), else
        the setting's train split; None for a question file named alone, which has no setting to
        take a train split from (never silently the demo set)."""
        if file:
            return QuestionSource(self.setting, None, file, self.data_dir)
        if self.file and not self.setting:
            return None
        return self.train()

    @classmethod
    def parse(cls, name: str, data_dir: str | None = None, dataset: str | None = None) -> QuestionSource:
        """Back from a recorded name: ``setting:split`` for a registered setting, else a file path
        (read in ``dataset``'s format when the record names one)."""
        setting, _, split = name.partition(":")
        if split and setting in DATASETS:
            return cls(setting, split, None, data_dir)
        return cls(dataset if dataset in DATASETS else None, None, name, data_dir)

    @classmethod
    def recorded(cls, record: dict, data_dir: str | None = None) -> QuestionSource:
        """The source a manifest's ``questions`` record describes."""
        return cls.parse(record["name"], data_dir, record.get("dataset"))


def questions_for(path: str | Path, source: QuestionSource, records: list[dict] | None = None) -> QuestionSet:
    """The questions a file (run or predictions) is scored against: the ones ``source`` names, else
    the set its manifest records (else ``source``'s default); a file made for another set is refused
    (``records``: the file's, where the caller has read them, so it is not read again)."""
    if not source.given:
        recorded = recorded_questions(path)
        if recorded:
            source = QuestionSource.recorded(recorded, source.data_dir)
    questions = source.load()
    check_questions(path, questions, records)
    return questions
