"""A finished build or training, rerun as the same command (a user cannot tell a kill in its last second
from a failure), says the work is done and exits 0, like ``make``; the same command with other inputs or
settings is refused in one line, and ``--force`` still rebuilds. Every ``ifqa index`` and ``ifqa train``
command that builds a folder is walked (FiD keeps checkpoints, which resume instead)."""

from __future__ import annotations

import json

import pytest

#: How each command is run here (small and fast), by its command path; the walk below holds it to the CLI.
INDEX = {
    "index bm25": lambda m: ["--engine", "bm25s"],
    "index bm25 --engine pyserini": lambda m: ["--engine", "pyserini"],
    "index dense": lambda m: ["--encoder", m, "--max-length", "32"],
}
TRAIN = {
    "train reranker": lambda m: ["--model", m, "--epochs", "1", "--group-size", "4", "--max-length", "48"],
    "train retriever": lambda m: ["--model", m, "--epochs", "1", "--questions-per-step", "4", "--max-length", "48"],
    "train control": lambda m: [],
}
OTHER_SETTINGS = {"index": ["--k1", "1.1"], "dense": ["--max-length", "40"], "train": ["--seed", "7"]}


def test_the_walk_covers_every_command_that_builds_a_folder():
    from ifqa.cli import cli
    from ifqa.cli.help import leaf_commands

    built = {
        path.removeprefix("ifqa ") for path, _ in leaf_commands(cli) if path.startswith(("ifqa index", "ifqa train"))
    }
    # the readers trained on a run rerun through the loop's recorded result: tests/readers/test_fid.py and
    # tests/training/test_llm.py
    assert built - {"train fid", "train llm"} == {c.replace(" --engine pyserini", "") for c in [*INDEX, *TRAIN]}


def _passages(tmp_path):
    corpus = tmp_path / "passages.jsonl"
    corpus.write_text(
        "".join(
            json.dumps({"id": f"p{i}", "title": "T", "text": f"river bridge word{i} city"}) + "\n" for i in range(6)
        )
    )
    return corpus


@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.heavy) if "pyserini" in n else n for n in INDEX])
def test_a_finished_index_rerun_is_done(cli, tmp_path, tiny_model, name):
    words = name.split()
    options = INDEX[name](tiny_model)
    corpus, out = _passages(tmp_path), tmp_path / "idx"
    command = [*words[:2], "--corpus", corpus, "-o", out, "--no-progress", *options]
    assert cli(*command).returncode == 0
    manifest = (out / "manifest.json").read_bytes()
    written = (out / "manifest.json").stat().st_ino  # a build writes a new file (atomically), so a new inode
    again = cli(*command)
    assert again.returncode == 0 and "nothing to build" in again.stderr, again.stderr
    assert (out / "manifest.json").read_bytes() == manifest  # found done, not built again
    assert (out / "manifest.json").stat().st_ino == written
    other = cli(*command, *OTHER_SETTINGS["dense" if "dense" in name else "index"])
    lines = other.stderr.strip().splitlines()
    assert other.returncode == 1 and len(lines) == 1 and "built from other inputs or settings" in lines[0]
    assert (out / "manifest.json").read_bytes() == manifest
    forced = cli(*command, "--force")
    # built again: a new file (the bytes may match, as a tiny build takes the same 0.01 s twice)
    assert forced.returncode == 0 and "nothing to build" not in forced.stderr, forced.stderr
    assert (out / "manifest.json").stat().st_ino != written


@pytest.mark.slow
@pytest.mark.parametrize("name", TRAIN)
def test_a_finished_training_rerun_is_done(cli, tmp_path, tiny_model, name):
    command = ["train", name.split()[1], "--index", "demo:bm25", "--setting", "demo", "--no-progress"]
    command += [*TRAIN[name](tiny_model), "-o", tmp_path / "out"]
    first = cli(*command)
    assert first.returncode == 0, first.stderr
    card = (tmp_path / "out" / "model" / "ifqa_card.json").read_bytes()
    again = cli(*command)
    assert again.returncode == 0 and "nothing to do" in again.stdout, again.stderr
    assert (tmp_path / "out" / "model" / "ifqa_card.json").read_bytes() == card
    other = cli(*command, *OTHER_SETTINGS["train"])
    assert other.returncode == 1 and "trained from other inputs or settings" in other.stderr
