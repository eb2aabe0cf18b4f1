"""Killed in its last second, then the same command again (trust round 6, family 1, for every long
command): every output ifqa publishes is a staged file or folder renamed into place (``os.replace`` or
``os.rename``; a folder it replaces is moved aside, then removed: ``io.publish_dir``), so a run's
commits, the renames and removals in its output's folder, are countable. An uninterrupted run counts
them; then, for each of the last commits, a run is SIGKILLed right after it (the process kills itself
there, so each point is hit exactly), and the same command is run again: it must finish with what the
uninterrupted run wrote, and leave nothing else (no staging, no lock, no resume state, nothing moved
aside) in the output's folder.

Every long command (one that shows progress: a ``--no-progress`` option) has a row in ``WALKS`` or is
named in ``ELSEWHERE`` with the test that walks it, so a new long command fails the first test until it
is covered."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import zipfile
from pathlib import Path
from types import SimpleNamespace

import pytest

from ifqa.cli import cli as ifqa_cli
from tests.commits import watched
from tests.conftest import run_cli
from tests.readers.fake_openai import FakeOpenAI
from tests.readers.test_iterative import searcher
from tests.test_outputs import _commands

pytestmark = pytest.mark.slow  # each kill point is a process of its own

#: The last commits each command is killed after (its last second: the final outputs and their records);
#: a replacement's last four: old aside, new in, old to staging, staging removed.
LAST = 3
LAST_OF = {"index bm25 --force": 4, "index dense --force": 4}

#: Run as ``python -c HOOK ARGS`` (the checkout on ``PYTHONPATH``): ifqa's command line, killing itself
#: right after commit number ``$KILL_AFTER_COMMIT`` in ``$KILL_WORK`` (caches elsewhere are filled by the
#: first run).
HOOK = """
import os, signal, sys
from tests.commits import watched
limit, done = int(os.environ["KILL_AFTER_COMMIT"]), []
def after_commit(path):
    done.append(path)
    if len(done) == limit:
        os.kill(os.getpid(), signal.SIGKILL)
with watched(os.environ["KILL_WORK"], after_commit):
    from ifqa.cli import main
    sys.argv[0] = "ifqa"
    main()
"""
ROOT = Path(__file__).resolve().parents[1]

#: Fields of a record that say how a run went rather than what it wrote (a rerun answers from the
#: response cache what the first run asked; times differ).
VOLATILE = {"seconds", "build_seconds", "cpu_seconds", "host_ms_per_step", "counters"}


def _long_commands() -> set[str]:
    return {
        " ".join(path) for path, command in _commands(ifqa_cli) if any(p.name == "no_progress" for p in command.params)
    }


#: Long commands walked by another test, which says where.
ELSEWHERE = {
    "train reranker": "tests/test_kill_resume.py::test_training_killed_in_its_last_moments_is_completed_by_the_same_command",
    "train retriever": "the same loop as train reranker (ifqa/training/loop.py), walked there",
    "train control": "the same loop as train reranker (ifqa/training/loop.py), walked there",
}


def _commits(args: list, work: Path, env: dict) -> list[str]:
    """The renames and removals in ``work`` of an uninterrupted run (in this process), in order."""
    seen: list[str] = []
    with watched(str(work), seen.append):
        result = run_cli(*args, env=env)
    assert result.returncode == 0, result.stderr
    return seen


def _snapshot(folder: Path) -> dict[str, object]:
    """Every file under ``folder``: JSON records without their volatile fields, other files as bytes."""

    def steady(value):
        if isinstance(value, dict):
            return {k: steady(v) for k, v in value.items() if k not in VOLATILE}
        return [steady(v) for v in value] if isinstance(value, list) else value

    found: dict[str, object] = {}
    for path in sorted(folder.rglob("*")):
        if path.is_file():
            name = str(path.relative_to(folder))
            found[name] = steady(json.loads(path.read_text())) if path.suffix == ".json" else path.read_bytes()
        elif path.is_dir() and not any(path.iterdir()):
            found[str(path.relative_to(folder)) + "/"] = b""
    return found


def _walk(args: list, work: Path, env: dict, last: int = LAST) -> None:
    """Kill after each of the last commits of ``args`` (whose outputs go in ``work``, from what it holds
    now), then rerun it."""
    initial = work.with_name("initial")  # what the output's folder held before (an index --force replaces)
    shutil.copytree(work, initial)
    commits = _commits(args, work, env)
    reference = _snapshot(work)
    assert commits and reference
    for point in range(max(1, len(commits) - last + 1), len(commits) + 1):
        shutil.rmtree(work)
        shutil.copytree(initial, work)
        killed = subprocess.run(
            [sys.executable, "-c", HOOK, *map(str, args)],
            env={**env, "KILL_AFTER_COMMIT": str(point), "KILL_WORK": str(work), "PYTHONPATH": _with_checkout(env)},
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert killed.returncode == -signal.SIGKILL, (point, commits[point - 1], killed.stderr[-2000:])
        again = run_cli(*args, env=env)
        after = f"killed after commit {point} of {len(commits)} ({Path(commits[point - 1]).name})"
        # a run killed once its outputs were whole is complete: the same command may refuse to redo it, in
        # one line (what it leaves must then be the whole output, as below)
        refused = again.returncode == 1 and len(again.stderr.strip().splitlines()) == 1
        assert again.returncode == 0 or refused, f"{after}: {again.stderr[-2000:]}"
        now = _snapshot(work)
        assert now.keys() == reference.keys(), f"{after}: {sorted(now.keys() ^ reference.keys())}"
        changed = {name: _difference(reference[name], now[name]) for name in reference if now[name] != reference[name]}
        assert not changed, f"{after}: {changed}"


def _with_checkout(env: dict) -> str:
    """``PYTHONPATH`` with the checkout first (the child imports tests.commits)."""
    return os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH", "")) if p)


def _difference(first, second) -> object:
    """Where two snapshots of a file differ: the keys of a JSON record, or just "bytes"."""
    if isinstance(first, dict) and isinstance(second, dict):
        keys = sorted(k for k in first.keys() | second.keys() if first.get(k) != second.get(k))
        return {k: (str(first.get(k))[:80], str(second.get(k))[:80]) for k in keys}
    return "bytes"


@pytest.fixture
def env(tmp_path):
    return {**os.environ, "IFQA_CACHE_DIR": str(tmp_path / "cache"), "OPENAI_API_KEY": "sk-test"}


@pytest.fixture
def work(tmp_path):
    folder = tmp_path / "work"
    folder.mkdir()
    return folder


def _passages(path: Path, n: int) -> Path:
    words = "river bridge town stone water mill road valley hill forest".split()
    with path.open("w") as handle:
        for i in range(n):
            text = " ".join(words[(i * 7 + j) % len(words)] for j in range(40))
            handle.write(json.dumps({"id": f"p{i}", "title": f"Place {i}", "text": f"{text} number {i}"}) + "\n")
    return path


def _articles(path: Path, n: int) -> Path:
    words = " ".join(f"w{i}" for i in range(150))
    with path.open("w") as handle:
        for i in range(n):
            handle.write(json.dumps({"id": str(i), "url": "u", "title": f"T{i}", "text": f"Para {i}. {words}"}) + "\n")
    return path


def _reranker(folder: Path, tiny_model) -> Path:
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    AutoModelForSequenceClassification.from_pretrained(tiny_model, num_labels=1).save_pretrained(folder)
    AutoTokenizer.from_pretrained(tiny_model).save_pretrained(folder)
    return folder


def _answers() -> dict[str, str]:
    from ifqa.datasets.demo import load_demo

    return {e.question: e.answers[0] for e in load_demo("dev") + load_demo("train")}


def _corpus_build(tmp_path, work, tools):
    articles = _articles(tmp_path / "articles.json", 120)
    return ["corpus", "build", articles, "--batch-size", "40", "-o", work / "passages.jsonl", "--no-progress"]


def _index_bm25(tmp_path, work, tools):
    corpus = _passages(tmp_path / "passages.jsonl", 300)
    return ["index", "bm25", "--corpus", corpus, "-o", work / "bm25", "--chunk-docs", "100", "--no-progress"]


def _index_dense(tmp_path, work, tools):
    corpus = _passages(tmp_path / "passages.jsonl", 40)
    return [
        "index", "dense", "--corpus", corpus, "-o", work / "dense", "--encoder", tools.model, "--device", "cpu",
        "--chunk-size", "32", "--max-length", "32", "--no-progress",
    ]  # fmt: skip


def _index_bm25_force(tmp_path, work, tools):
    """``--force`` over an index: the old one is moved aside, the new one put in place, the old removed."""
    old = _passages(tmp_path / "old.jsonl", 50)
    assert run_cli("index", "bm25", "--corpus", old, "-o", work / "bm25", "--no-progress").returncode == 0
    return [*_index_bm25(tmp_path, work, tools)[:-1], "--force", "--no-progress"]


def _index_dense_force(tmp_path, work, tools):
    args = _index_dense(tmp_path, work, tools)
    old = _passages(tmp_path / "old.jsonl", 20)
    assert run_cli(*[old if a == tmp_path / "passages.jsonl" else a for a in args]).returncode == 0
    return [*args[:-1], "--force", "--no-progress"]


def _retrieve(tmp_path, work, tools):
    return ["retrieve", "--k", "20", "-o", work / "run.jsonl", "--no-progress"]


def _rerank(tmp_path, work, tools):
    run = tmp_path / "run.jsonl"
    assert run_cli("retrieve", "--k", "4", "-o", run, "--no-progress").returncode == 0
    model = _reranker(tmp_path / "reranker", tools.model)
    return ["rerank", "--run", run, "--model", model, "--depth", "4", "-o", work / "reranked.jsonl", "--no-progress"]


def _read_majority(tmp_path, work, tools):
    return ["read", "majority", "-o", work / "majority.jsonl", "--no-progress"]


#: Commands that need an LLM endpoint read the one the test starts (``tools.url``).
def _read_llm(tmp_path, work, tools):
    return [
        "read",
        "llm",
        "--model",
        "m",
        "--base-url",
        tools.url,
        "--demos",
        "0",
        "-o",
        work / "preds.jsonl",
        "--no-progress",
    ]


def _read_iterative(tmp_path, work, tools):
    return [
        "read",
        "iterative",
        "--model",
        "m",
        "--base-url",
        tools.url,
        "--max-steps",
        "2",
        "-o",
        work / "it.jsonl",
        "--no-progress",
    ]


def _judge(tmp_path, work, tools):
    from ifqa.datasets.demo import load_demo

    predictions = tmp_path / "preds.jsonl"
    predictions.write_text(
        "".join(json.dumps({"qid": e.qid, "prediction": e.answers[0]}) + "\n" for e in load_demo("dev"))
    )
    return [
        "judge",
        "--predictions",
        predictions,
        "--model",
        "j",
        "--base-url",
        tools.url,
        "-o",
        work / "judged.jsonl",
        "--no-progress",
    ]


def _analyze_premise(tmp_path, work, tools):
    predictions = tmp_path / "preds.jsonl"
    args = ["read", "llm", "--model", "m", "--base-url", tools.url, "--demos", "0", "-o", predictions, "--no-progress"]
    return args, ["analyze", "premise", "--predictions", predictions, "-o", work / "premise", "--no-progress"]


def _data_download(tmp_path, work, tools):
    from importlib import resources

    root, url = tools.served
    demo = resources.files("ifqa.demo") / "wiqa"
    with zipfile.ZipFile(root / "wiqa.zip", "w") as archive:
        for split in ("train", "dev", "test"):
            archive.writestr(f"{split}.jsonl", (demo / f"{'dev' if split == 'test' else split}.jsonl").read_text())
    return ["data", "download", "--setting", "wiqa", "--url", f"{url}/wiqa.zip", "--data-dir", work, "--no-progress"]


def _experiment_run(tmp_path, work, tools):
    config = tmp_path / "e.yaml"
    config.write_text(
        f"""
name: walk
questions: {{setting: demo, split: dev}}
output: {work / "out"}
k: 5
retrievers:
  - {{name: bm25, indexes: ["demo:bm25"]}}
readers:
  - {{name: open, mode: open, retriever: bm25, passages: 2, model: m, base_url: "{tools.url}", demos: 0}}
"""
    )
    return ["experiment", "run", config, "--no-progress"]


WALKS = {
    "corpus build": _corpus_build,
    "index bm25": _index_bm25,
    "index bm25 --force": _index_bm25_force,
    "index dense": _index_dense,
    "index dense --force": _index_dense_force,
    "retrieve": _retrieve,
    "rerank": _rerank,
    "read majority": _read_majority,
    "read llm": _read_llm,
    "read iterative": _read_iterative,
    "judge": _judge,
    "analyze premise": _analyze_premise,
    "data download": _data_download,
    "experiment run": _experiment_run,
}


def test_every_long_command_is_walked():
    walked = set(WALKS) | set(ELSEWHERE) | set(NOT_WALKED)
    assert _long_commands() <= walked, sorted(_long_commands() - walked)


#: Long commands not walked here, and why.
NOT_WALKED = {
    "train fid": "a tiny T5 trained per kill point costs more than this suite's time allows; its checkpoints are "
    "swapped in by io.atomic_dir (walked here through index --force) and settled when it starts; "
    "tests/readers/test_fid.py stops it mid-step and resumes it to the same losses",
    "train llm": "the same loop and saves as train fid (io.atomic_dir for best/ and last/, the recorded result "
    "last); tests/training/test_llm.py stops it and resumes it to the same losses, and reruns a finished run",
    "read fid": "needs a trained FiD checkpoint; it publishes its predictions and their manifest through "
    "artifacts.write_predictions and write_manifest, as read llm does (walked here)",
}


#: Walks left to the heavy run: each runs a dense build seven times (34-41 s on 2 cores); the dense
#: build's publish and swap are the ones index bm25 walks by default (io.publish_dir, io.settled).
HEAVY_WALKS = {"index dense", "index dense --force"}


@pytest.mark.parametrize(
    "name", [pytest.param(n, marks=pytest.mark.heavy) if n in HEAVY_WALKS else n for n in sorted(WALKS)]
)
def test_killed_in_its_last_second_then_the_same_command_finishes(name, tmp_path, work, env, tiny_model, http_server):
    with FakeOpenAI(_answers()) as server:
        server.script = searcher if name == "read iterative" else None
        made = WALKS[name](tmp_path, work, SimpleNamespace(model=tiny_model, url=server.url, served=http_server))
        before, args = made if isinstance(made, tuple) else (None, made)
        if before:
            assert run_cli(*before, env=env).returncode == 0
        _walk(args, work, env, LAST_OF.get(name, LAST))


def test_a_reader_meeting_a_swap_cut_short_says_where_the_index_is_and_moves_nothing(tmp_path, work, env):
    """Killed between moving the old index aside and putting the new one in: a reader is told in one
    line (it moves no folder: a writer could be between its renames); the build's rerun puts one in place."""
    from ifqa.io import aside

    corpus = _passages(tmp_path / "passages.jsonl", 30)
    build = ["index", "bm25", "--corpus", corpus, "-o", work / "bm25", "--no-progress"]
    assert run_cli(*build, env=env).returncode == 0
    (work / "bm25").rename(aside(work / "bm25"))  # where publish_dir keeps it between its two renames
    result = run_cli("retrieve", "--index", work / "bm25", "--k", "3", "-o", tmp_path / "run.jsonl", env=env)
    assert result.returncode == 1 and len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert "killed while swapping it in" in result.stderr and str(aside(work / "bm25")) in result.stderr
    assert sorted(p.name for p in work.iterdir()) == [".bm25.replaced"]
    assert run_cli(*build, "--force", env=env).returncode == 0
    assert sorted(p.name for p in work.iterdir()) == ["bm25"]
