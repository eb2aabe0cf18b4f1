"""Question sets published only on the Hugging Face Hub, registered as settings and read with ``datasets``:
FaithEval's counterfactual set (multiple choice, its premise in its context). docs/data.md says what each
holds and why CofCA is not among them."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from ifqa.artifacts import Example, QuestionSet
from ifqa.datasets.hub import PREFIX, is_hub, load_hub_questions
from ifqa.errors import IfqaError


@dataclass(frozen=True)
class HubSet:
    """A setting read from ``hub_id`` (``$<env>`` names another id or a local copy in Hub layout)."""

    name: str
    hub_id: str
    env: str
    splits: tuple[str, ...]
    default_split: str
    task: str
    premise: str = "question"  # where the counterfactual is stated: "question" (IfQA's) or "context"

    def questions(self, split: str) -> QuestionSet:
        """The split, with the Hub record (id, split, revision, fingerprint) manifests keep."""
        if split not in self.splits:
            raise IfqaError(f"{self.name} has {', '.join(self.splits)} splits, not {split!r}")
        location = os.environ.get(self.env) or self.hub_id  # may carry options of its own: ID?revision=SHA
        return load_hub_questions(f"{PREFIX}{location}{'&' if '?' in location else '?'}split={split}", self.name)

    def load(self, split: str, directory: str | Path | None = None) -> list[Example]:
        """``directory`` (ifqa's data folder) is unused: ``datasets`` keeps its own cache."""
        return self.questions(split).examples

    def load_file(self, path: str | Path) -> list[Example]:
        """A copy named by ``--questions hf:FOLDER`` (or a bare folder) with ``--setting`` this set."""
        spec = str(path) if is_hub(str(path)) else f"{PREFIX}{path}"
        return load_hub_questions(spec, self.name).examples


FAITHEVAL = HubSet(
    "faitheval", "Salesforce/FaithEval-counterfactual-v1.0", "IFQA_FAITHEVAL", ("test",), "test", "mc", "context"
)
