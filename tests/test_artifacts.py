"""A run without a manifest (issue #47, family 9): ids collide across question sets, so a file that
records no set is checked by its own records' question texts, by every command and API function
that reads a run for a question set (found by walking the command tree)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

import ifqa
from ifqa.cli import cli
from ifqa.errors import IfqaError
from tests.conftest import run_cli
from tests.test_outputs import _commands, _filler, _flag

# commands whose --run is no passage source for the questions they are given
IGNORES_THE_QUESTIONS = {("read", "majority")}  # a closed-book baseline: the run is not read
# what a command needs beyond its required options to reach its run (a model name, a format)
GIVEN = {("read", "llm"): ["--model", "x"], ("convert",): ["--to", "trec"]}


def _reads_a_run_for_questions(command) -> bool:
    names = {param.name for param in command.params}
    return "setting" in names and bool(names & {"run_path", "run_option"})


READERS = [path for path, command in _commands(cli) if _reads_a_run_for_questions(command)]


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """The demo run, and copies without a manifest: one as it was, one whose third record asks
    another question under the same qid."""
    from tests.readers.tiny_models import tiny_t5

    base = tmp_path_factory.mktemp("runs")
    made = base / "made.jsonl"
    assert run_cli("retrieve", "--k", "3", "-o", made, "--no-progress").returncode == 0
    shutil.copy(made, base / "bare.jsonl")
    records = [json.loads(line) for line in made.read_text().splitlines()]
    records[2]["question"] = "If the moon were cheese, what would mice eat?"
    (base / "other.jsonl").write_text("".join(json.dumps(record) + "\n" for record in records))
    return base, tiny_t5(base / "t5")


def test_the_walk_finds_the_commands_that_read_runs():
    assert {("evaluate",), ("rerank",), ("read", "fid"), ("read", "llm"), ("convert",)} <= set(READERS)


@pytest.mark.parametrize("path", [p for p in READERS if p not in IGNORES_THE_QUESTIONS], ids=" ".join)
def test_a_run_of_other_questions_without_a_manifest_is_refused_by_every_command(runs, path, tmp_path):
    base, t5 = runs
    command = dict(_commands(cli))[path]
    args = [*path, "--run", str(base / "other.jsonl"), "--setting", "demo", *GIVEN.get(path, [])]
    for param in command.params:
        if param.required and param.name not in {"run_path", "run_option"} and _flag(param) not in args:
            args += (
                ["--checkpoint", str(t5)] if param.name == "checkpoint" else _filler(param, tmp_path / "x", tmp_path)
            )
    if any(param.name == "checkpoint" for param in command.params) and "--checkpoint" not in args:
        args += ["--checkpoint", str(t5)]
    output = [p for p in command.params if getattr(p, "writes", False)]
    if output:
        args += [output[0].opts[0], str(tmp_path / "out")]
    if any(param.name == "no_progress" for param in command.params):
        args.append("--no-progress")
    result = run_cli(*args)
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 1 and len(lines) == 1, result.stderr
    assert "the record of qid '2' asks 'If the moon were cheese" in lines[0] and "other.jsonl" in lines[0]
    assert list(tmp_path.iterdir()) == []


def test_the_api_checks_a_run_file_the_same_way(runs):
    base, _ = runs
    dev = ifqa.load_questions("demo", "dev")
    with pytest.raises(IfqaError, match="asks 'If the moon were cheese"):
        ifqa.evaluate_run(base / "other.jsonl", dev)
    with pytest.raises(IfqaError, match="asks 'If the moon were cheese"):
        ifqa.read("fid", dev, run=base / "other.jsonl", checkpoint=str(base / "t5"))


def test_a_run_of_these_questions_without_a_manifest_scores_as_with_one(runs):
    base, _ = runs
    dev = ifqa.load_questions("demo", "dev")
    assert not Path(f"{base / 'bare.jsonl'}.manifest.json").exists()
    assert ifqa.evaluate_run(base / "bare.jsonl", dev) == ifqa.evaluate_run(base / "made.jsonl", dev)
