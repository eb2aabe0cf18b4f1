"""What every reader trained on a run file shares (``training/runs.py``), tested for each such kind the
registry holds and for a kind declared outside ifqa (``tests/toys/toy_trainer.py``)."""

from __future__ import annotations

import pytest

from ifqa.registry import TRAINABLE
from tests.training.test_llm import DEV, TOY, write_run

RUN_KINDS = [name for name in TRAINABLE if TRAINABLE.get(name).inputs == "run"]


@pytest.fixture
def every_run_kind(monkeypatch):
    monkeypatch.setattr(TRAINABLE, "_entries", {**TRAINABLE._entries, "toy": "tests.toys.toy_trainer:TOY"})
    return [*RUN_KINDS, "toy"]


def test_every_run_kind_trains_on_no_dev_question_and_on_no_evaluation_split(cli, tmp_path, every_run_kind):
    """One gate before any model loads (``runs.held_apart``): a run of a dev split is refused, a train run
    that is mostly ``--dev-run``'s questions is refused (its dev EM would score training questions), each
    in one line naming the run, and nothing is written."""
    assert {"fid", "llm"} <= set(RUN_KINDS)
    dev = write_run(tmp_path / "dev.jsonl", DEV, name="toy:dev")
    overlapping = write_run(tmp_path / "overlap.jsonl", TOY + DEV)
    for kind in every_run_kind:
        cases = [
            (["--run", dev], f"{dev}: is a run of toy:dev"),
            (["--run", overlapping, "--dev-run", dev], "1 of its 5 questions are questions of --dev-run"),
        ]
        for args, expected in cases:
            result = cli("train", kind, *args, "-o", tmp_path / kind, "--steps", "1", "--no-progress")
            lines = [line for line in result.stderr.splitlines() if line.strip()]
            assert result.returncode != 0 and len(lines) == 1 and expected in lines[0], (kind, args, result.stderr)
            assert not (tmp_path / kind).exists(), kind
