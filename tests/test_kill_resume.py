"""SIGKILL (or SIGTERM) in the middle of each long job, then the same command again: it must finish
with the output an uninterrupted run writes (byte for byte, or the same weights), nothing
half-written at the final name. Corpus building has its own tests (tests/corpus/test_kill.py,
test_build.py). The signalled run is a process of its own; the uninterrupted reference and the
rerun go through the in-process runner (tests/in_process.py), which spares two start-ups a test."""

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tests.conftest import run_cli
from tests.readers.fake_openai import FakeOpenAI

pytestmark = pytest.mark.slow  # each test runs a long job, one run a process of its own


def _ifqa(*args) -> list[str]:
    return [sys.executable, "-m", "ifqa.cli", *map(str, args)]


def _run(command: list[str], env: dict) -> None:
    """``command`` (an ``_ifqa`` list) to completion, in this process."""
    result = run_cli(*command[len(_ifqa()) :], env=env)
    assert result.returncode == 0, result.stderr


def _kill_when(command: list[str], env: dict, started_work) -> None:
    """Start ``command`` and SIGKILL it as soon as ``started_work()`` sees part of its work done."""
    _signal_when(command, env, started_work, signal.SIGKILL)


@pytest.fixture
def env(tmp_path):
    return {**os.environ, "IFQA_CACHE_DIR": str(tmp_path / "cache"), "OPENAI_API_KEY": "sk-test"}


def test_llm_reading_killed_and_resumed(tmp_path, env):
    from ifqa.datasets.demo import load_demo

    answers = {e.question: e.answers[0] for e in load_demo("dev") + load_demo("train")}
    with FakeOpenAI(answers, latency=0.3) as server:
        command = _ifqa("read", "llm", "--model", "m", "--base-url", server.url, "--demos", "0", "--no-progress")
        reference = tmp_path / "reference.jsonl"
        _run(command + ["-o", reference, "--cache", tmp_path / "ref.sqlite"], env)
        out, cache = tmp_path / "out.jsonl", tmp_path / "run.sqlite"
        before = len(server.requests)
        _kill_when(command + ["-o", out, "--cache", cache], env, lambda: len(server.requests) - before >= 6)
        assert not out.exists()
        sent = len(server.requests)
        _run(command + ["-o", out, "--cache", cache], env)
    assert out.read_bytes() == reference.read_bytes()
    assert len(server.requests) - sent < 24 * 2  # answers received before the kill were not asked again


def test_judging_killed_and_resumed(tmp_path, env):
    """A judge killed mid-run, then the same command: the same verdicts, and only requests whose reply
    never arrived (at most the ones in flight at the kill) are sent again."""
    from ifqa.datasets.demo import load_demo

    predictions = tmp_path / "preds.jsonl"
    predictions.write_text(
        "".join(json.dumps({"qid": e.qid, "prediction": e.answers[0]}) + "\n" for e in load_demo("dev"))
    )
    with FakeOpenAI({}, latency=0.3) as server:
        command = _ifqa(
            "judge", "--predictions", predictions, "--model", "j", "--base-url", server.url, "--no-progress"
        )
        reference = tmp_path / "reference.jsonl"
        _run(command + ["-o", reference, "--cache", tmp_path / "ref.sqlite"], env)
        out, cache = tmp_path / "out.jsonl", tmp_path / "run.sqlite"
        before = len(server.requests)
        _kill_when(command + ["-o", out, "--cache", cache], env, lambda: len(server.requests) - before >= 8)
        assert not out.exists()
        _run(command + ["-o", out, "--cache", cache], env)
        sent = len(server.requests) - before
    assert out.read_bytes() == reference.read_bytes()
    assert 24 <= sent <= 24 + 4  # --concurrency 4: at most the four in flight were asked again


def test_iterative_reading_killed_and_resumed(tmp_path, env):
    """Killed mid-run, the same command writes what an uninterrupted run writes: every cached step meets the
    same passages again (retrieval is deterministic), so only requests in flight at the kill are sent again."""
    from tests.readers.test_iterative import searcher

    with FakeOpenAI({}, latency=0.2) as server:
        server.script = searcher
        command = _ifqa("read", "iterative", "--model", "m", "--base-url", server.url, "--no-progress")
        reference = tmp_path / "reference.jsonl"
        _run(command + ["-o", reference, "--cache", tmp_path / "ref.sqlite"], env)
        before = len(server.requests)
        out, cache = tmp_path / "out.jsonl", tmp_path / "run.sqlite"
        _kill_when(command + ["-o", out, "--cache", cache], env, lambda: len(server.requests) - before >= 30)
        assert not out.exists()
        _run(command + ["-o", out, "--cache", cache], env)
        sent = len(server.requests) - before
    assert out.read_bytes() == reference.read_bytes()
    assert 3 * 24 <= sent <= 3 * 24 + 4  # --concurrency 4: at most the four in flight were asked again


@pytest.mark.heavy  # 19 s; the rerank walk of test_kill_last_second kills and resumes it by default
def test_reranking_killed_and_resumed(tmp_path, env, tiny_model):
    model = tmp_path / "reranker"
    _run(
        _ifqa(
            "train",
            "--reranker",
            "--index",
            "demo:bm25",
            "--setting",
            "demo",
            "--model",
            tiny_model,
            "--group-size",
            "4",
            "--questions-per-step",
            "2",
            "--max-length",
            "48",
            "--no-progress",
            "-o",
            model,
        ),
        env,
    )
    run = tmp_path / "run.jsonl"
    _run(_ifqa("retrieve", "--k", "100", "-o", run, "--no-progress"), env)
    command = _ifqa(
        "rerank", "--run", run, "--model", model / "model", "--depth", "100", "--batch-size", "8", "--no-progress"
    )
    reference = tmp_path / "reference.jsonl"
    _run(command + ["-o", reference], env)
    out = tmp_path / "out.jsonl"
    partial = tmp_path / "out.jsonl.partial"
    _kill_when(command + ["-o", out], env, lambda: partial.exists() and partial.read_text().count("\n") >= 4)
    assert not out.exists()
    _run(command + ["-o", out], env)
    assert out.read_bytes() == reference.read_bytes()


def _reranker_training(tiny_model, epochs: int) -> list[str]:
    """A reranker training on the demo set, one question a step: epochs x 12 steps."""
    return _ifqa(
        "train",
        "--reranker",
        "--index",
        "demo:bm25",
        "--setting",
        "demo",
        "--model",
        tiny_model,
        "--epochs",
        epochs,
        "--questions-per-step",
        "1",
        "--group-size",
        "4",
        "--max-length",
        "48",
        "--no-progress",
    )


def _same_weights(a, b) -> bool:
    """Whether two training folders hold bit-identical models."""
    import torch
    from safetensors.torch import load_file

    first, second = load_file(a / "model" / "model.safetensors"), load_file(b / "model" / "model.safetensors")
    return first.keys() == second.keys() and all(torch.equal(first[k], second[k]) for k in first)


def test_reranker_training_killed_and_resumed(tmp_path, env, tiny_model):
    command = _reranker_training(tiny_model, epochs=5) + ["--save-every", "20"]
    reference = tmp_path / "reference"
    _run(command + ["-o", reference], env)
    out = tmp_path / "out"
    _kill_when(command + ["-o", out], env, lambda: (out / "state" / "trainer.pt").exists())  # saved at step 20
    assert not (out / "model" / "config.json").exists() or (out / "model" / "ifqa_card.json").exists()
    _run(command + ["-o", out], env)
    assert _same_weights(reference, out)


@pytest.mark.heavy  # 18 s; the killed-and-resumed reranker training runs by default
def test_reranker_training_terminated_saves_the_step_it_reached(tmp_path, env, tiny_model):
    import torch

    command = _reranker_training(tiny_model, epochs=8)
    reference = tmp_path / "reference"
    _run(command + ["-o", reference], env)
    out = tmp_path / "out"
    shown = [c for c in command if c != "--no-progress"]  # the progress bar says how far training is
    process = subprocess.Popen(
        shown + ["-o", out], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    )
    stderr_seen: list[str] = []
    reader = threading.Thread(target=lambda: stderr_seen.extend(iter(lambda: process.stderr.read(1), "")), daemon=True)
    reader.start()
    deadline = time.time() + 300
    while (
        not re.search(r"train: .*\| ([3-9]|\d\d+)/\d+", "".join(stderr_seen))
        and process.poll() is None
        and time.time() < deadline
    ):
        time.sleep(0.05)
    assert process.poll() is None, "finished before it could be stopped"
    process.send_signal(signal.SIGTERM)
    process.wait(timeout=120)
    reader.join(timeout=10)
    stderr = "".join(stderr_seen)
    assert process.returncode == 143, stderr
    assert stderr.strip().splitlines()[-1] == "ifqa: terminated; rerun the same command to resume"
    saved = torch.load(out / "state" / "trainer.pt", weights_only=True)
    assert 3 <= saved["step"] < 96  # 96 steps in all, fewer than the 200 between periodic saves
    assert f"stopped at step {saved['step']} of" in stderr
    _run(command + ["-o", out], env)
    assert _same_weights(reference, out)
    losses = [
        [entry["loss"] for entry in json.loads((folder / "model" / "ifqa_card.json").read_text())["loss"]]
        for folder in (reference, out)
    ]
    assert losses[0] == losses[1]  # the running loss average resumes too


def _collection(path, n: int) -> None:
    words = "river bridge town stone water mill road valley hill forest".split()
    path.write_text(
        "".join(
            json.dumps(
                {
                    "id": f"p{i}",
                    "title": f"Place {i}",
                    "text": " ".join(words[(i * 7 + j) % len(words)] for j in range(60)) + f" number {i}",
                }
            )
            + "\n"
            for i in range(n)
        )
    )


def _signal_when(command: list[str], env: dict, started_work, signum: int) -> subprocess.CompletedProcess:
    """Start ``command``, send ``signum`` once ``started_work()`` sees part of its work, and wait for it."""
    # Ctrl-C as a terminal delivers it: a test run in the background (a shell starts it with SIGINT
    # ignored, and children inherit that) must not make the command deaf to it
    process = subprocess.Popen(
        command,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    deadline = time.time() + 300
    while not started_work() and process.poll() is None and time.time() < deadline:
        time.sleep(0.02)
    assert process.poll() is None, "finished before it could be signalled"
    process.send_signal(signum)
    out, err = process.communicate(timeout=120)
    return subprocess.CompletedProcess(command, process.returncode, out, err)


def _staging(folder) -> list:
    return [p.name for p in folder.iterdir() if p.name.endswith((".tmp", ".lock", ".partial"))]


@pytest.mark.parametrize(
    "job, signum",
    [
        pytest.param("index dense", signal.SIGINT, marks=pytest.mark.heavy),
        pytest.param("index dense", signal.SIGTERM, marks=pytest.mark.heavy),
        ("index bm25", signal.SIGINT),
        ("retrieve", signal.SIGTERM),
    ],
)
def test_long_commands_stop_on_a_signal_and_the_same_command_resumes(tmp_path, env, job, signum, tiny_model):
    """Ctrl-C (130) and SIGTERM (143) stop each long command with one line, nothing at the final name;
    the same command then writes what an uninterrupted run writes, and no staging is left. Dense
    indexing uses a tiny encoder: the chunks, not the model, are what is tested."""
    corpus = tmp_path / "passages.jsonl"
    _collection(corpus, {"index dense": 600, "index bm25": 40000, "retrieve": 30}[job])
    if job == "retrieve":
        questions = tmp_path / "q.jsonl"
        questions.write_text(
            "".join(
                json.dumps(
                    {
                        "idx": i,
                        "question": f"If the river at town {i} ran dry, what would the mill grind?",
                        "answers": ["stone"],
                    }
                )
                + "\n"
                for i in range(3000)
            )
        )
        _run(_ifqa("index", "bm25", "--corpus", corpus, "-o", tmp_path / "idx", "--no-progress"), env)

    def command(out):
        if job == "index dense":
            return _ifqa(
                "index",
                "dense",
                "--corpus",
                corpus,
                "-o",
                out,
                "--encoder",
                tiny_model,
                "--device",
                "cpu",
                "--chunk-size",
                "32",
                "--max-length",
                "64",
                "--no-progress",
            )
        if job == "index bm25":
            return _ifqa("index", "bm25", "--corpus", corpus, "-o", out, "--chunk-docs", "5000", "--no-progress")
        return _ifqa(
            "retrieve", "--index", tmp_path / "idx", "--questions", questions, "--k", "20", "-o", out, "--no-progress"
        )

    reference, out = tmp_path / "reference", tmp_path / "out"
    _run(command(reference), env)
    started = {
        "index dense": lambda: any(out.glob("embeddings/chunk-*.npy")),
        "index bm25": lambda: bool(_staging(tmp_path)),
        "retrieve": lambda: bool(_staging(tmp_path)),
    }[job]
    result = _signal_when(command(out), env, started, signum)
    assert result.returncode == (130 if signum == signal.SIGINT else 143), result.stderr
    assert result.stderr.strip().splitlines()[-1].endswith("rerun the same command to resume")
    assert not (out / "manifest.json").exists() and not (job == "retrieve" and out.exists())
    _run(command(out), env)
    assert not _staging(tmp_path)
    if job == "retrieve":
        assert out.read_bytes() == reference.read_bytes()
    else:
        for name in ("offsets.npy", "index.faiss", "data.csc.index.npy"):
            if (reference / name).exists():
                assert (out / name).read_bytes() == (reference / name).read_bytes(), name


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_llm_reading_stops_within_seconds_while_requests_are_retried(tmp_path, env, signum):
    """An endpoint that answers 500 to everything: the requests are in their retry backoff (and in
    flight) when Ctrl-C or SIGTERM comes; the command stops within 2 seconds, with its exit code."""
    with FakeOpenAI({}) as server:
        server.fail_always = True
        command = _ifqa(
            "read",
            "llm",
            "--model",
            "m",
            "--base-url",
            server.url,
            "--demos",
            "0",
            "--no-progress",
            "-o",
            tmp_path / "out.jsonl",
            "--cache",
            tmp_path / "c.sqlite",
        )
        process = subprocess.Popen(
            command,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
        )
        deadline = time.time() + 120
        while len(server.requests) < 8 and process.poll() is None and time.time() < deadline:
            time.sleep(0.05)
        assert process.poll() is None, "finished before it could be signalled"
        time.sleep(0.5)  # into the backoff
        sent = time.time()
        process.send_signal(signum)
        _, err = process.communicate(timeout=30)
        took = time.time() - sent
    assert process.returncode == (130 if signum == signal.SIGINT else 143), err
    assert took < 2.0, f"took {took:.1f} s to stop"
    assert not (tmp_path / "out.jsonl").exists()


#: The records a training run writes once its last step is done, in order: a kill after any one of them
#: (SIGKILL in its last second) must leave a folder the same command completes without training again.
LAST_RECORDS = ["model", "train_result.json", "ifqa_card.json", "dev-reranked.jsonl"]


@pytest.mark.parametrize("after", LAST_RECORDS)
def test_training_killed_in_its_last_moments_is_completed_by_the_same_command(
    tmp_path, env, tiny_model, monkeypatch, after
):
    """Trust round 6, family 1: `ifqa train reranker` killed after its model files were written said
    "already holds a trained model" to the same command. A run is complete when its card's last write
    says so; anything less resumes (here the kill is an interrupt raised right after that record is
    written, in this process, so each point is hit exactly)."""
    import ifqa.io

    dev_run = tmp_path / "dev.jsonl"
    _run(_ifqa("retrieve", "--k", "8", "--no-progress", "-o", dev_run), env)
    command = _reranker_training(tiny_model, epochs=1) + ["--dev-run", dev_run]
    reference = tmp_path / "reference"
    _run(command + ["-o", reference], env)
    out = tmp_path / "out"
    originals = {name: getattr(ifqa.io, name) for name in ("atomic_dir", "atomic_write")}
    fired = []

    def killing(name):
        import contextlib

        @contextlib.contextmanager
        def wrapped(path, *args, **kwargs):
            with originals[name](path, *args, **kwargs) as handle:
                yield handle
            if Path(path).name == after and not fired:
                fired.append(path)
                raise KeyboardInterrupt

        return wrapped

    import sys

    import ifqa.training.reranker  # noqa: F401 - loaded, so the names it imported are replaced below too

    for name, original in originals.items():  # in ifqa.io and wherever a module imported it by name
        for module in [m for m in list(sys.modules.values()) if (getattr(m, "__name__", "") or "").startswith("ifqa")]:
            if getattr(module, name, None) is original:
                monkeypatch.setattr(module, name, killing(name))
    first = run_cli(*command[len(_ifqa()) :], "-o", out, env=env)
    assert fired and first.returncode == 130, first.stderr
    monkeypatch.undo()
    losses = (out / "train_log.jsonl").read_bytes() if (out / "train_log.jsonl").exists() else None
    _run(command + ["-o", out], env)  # the same command completes the run
    assert _same_weights(reference, out)
    card, expected = (json.loads((f / "model" / "ifqa_card.json").read_text()) for f in (out, reference))
    assert card["complete"], card
    assert card["dev"] == expected["dev"], (card["dev"], expected["dev"])
    steps = [[(h["step"], h["loss"]) for h in c["loss"]] for c in (card, expected)]  # their seconds differ
    assert steps[0] == steps[1], steps
    if losses is not None:
        assert (out / "train_log.jsonl").read_bytes() == losses  # trained once: not again
    again = run_cli(*command[len(_ifqa()) :], "-o", out, env=env)  # done: said so, nothing trained again
    assert again.returncode == 0 and "nothing to do" in again.stdout, again.stderr
    assert json.loads((out / "model" / "ifqa_card.json").read_text()) == card
