"""The backend contract (ifqa/llm/protocol.py): every registered backend subclasses ``Backend`` and
declares its capabilities there; a new backend is one module and one registry line; nothing in
ifqa/llm probes a backend by ``getattr`` or names one by string."""

from __future__ import annotations

import ast
import json
import re
from dataclasses import fields
from pathlib import Path

from ifqa.llm.config import ModelAccess
from ifqa.llm.protocol import Backend, BackendOptions
from ifqa.registry import LLM_BACKENDS

IFQA = Path(__file__).resolve().parents[2] / "ifqa"


def test_every_backend_subclasses_the_contract():
    import importlib

    for name in LLM_BACKENDS:
        module, attribute = LLM_BACKENDS._entries[name].split(":")
        kind = getattr(importlib.import_module(module, "ifqa.llm"), attribute)  # without the optional library
        assert issubclass(kind, Backend), name
        assert kind.complete is not Backend.complete, name


def test_backend_options_are_model_access_fields_by_name():
    access = {f.name for f in fields(ModelAccess)}
    assert {f.name for f in fields(BackendOptions)} - access == {"api_key"}
    given = ModelAccess(model="m", batch_size=3, model_threads=2, context_window=512, timeout=5.0, retries=1)
    options = BackendOptions.from_access(given, "key")
    assert (options.batch_size, options.model_threads, options.context_window, options.api_key) == (3, 2, 512, "key")
    assert (BackendOptions().batch_size, BackendOptions().timeout, BackendOptions().retries) == (
        ModelAccess().batch_size,
        ModelAccess().timeout,
        ModelAccess().retries,
    )


def test_nothing_in_ifqa_probes_a_backend_or_names_one():
    """Capabilities are read as the base class declares them; which backend a session has is never asked by
    name, anywhere in the package (``serve`` decided its read lock by ``backend_name != "openai"``)."""
    found, names = [], set(LLM_BACKENDS)
    for path in sorted(IFQA.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            where = f"{path.relative_to(IFQA)}:{getattr(node, 'lineno', 0)}"  # unparsed only where found
            if isinstance(node, ast.Call) and getattr(node.func, "id", "") in ("getattr", "hasattr") and node.args:
                if re.search(r"\bbackend\b", ast.unparse(node.args[0])):  # not torch.backends
                    found.append(f"{where}: {ast.unparse(node)}")
            if isinstance(node, ast.Compare) and "backend" in ast.unparse(node):
                sides = [node.left, *node.comparators]
                named = [s for s in sides if isinstance(s, ast.Constant) and s.value in names]
                listed = [
                    s
                    for s in sides
                    if isinstance(s, (ast.Tuple, ast.List, ast.Set))
                    and any(isinstance(e, ast.Constant) and e.value in names for e in s.elts)
                ]
                if named or listed or "['backend']" in ast.unparse(node.left):
                    found.append(f"{where}: {ast.unparse(node)}")
    assert found == []


def test_a_toy_backend_is_one_module_and_one_registry_line(monkeypatch, cli, tmp_path):
    monkeypatch.setattr(
        LLM_BACKENDS, "_entries", {**LLM_BACKENDS._entries, "shouting": "tests.toys.toy_backend:ShoutingBackend"}
    )
    env = {**__import__("os").environ, "IFQA_CACHE_DIR": str(tmp_path / "cache")}
    out = tmp_path / "p.jsonl"
    result = cli("read", "llm", "--backend", "shouting", "--model", "toy", "-o", out, "--no-progress", env=env)
    assert result.returncode == 0, result.stderr
    predictions = [json.loads(line) for line in out.read_text().splitlines()]
    assert predictions and all(p["prediction"] and p["prediction"] == p["prediction"].upper() for p in predictions)
    manifest = json.loads(Path(f"{out}.manifest.json").read_text())
    assert manifest["backend"]["backend"] == "shouting"
    refused = cli("read", "llm", "--backend", "shouting", "--model", "toy", "--thinking-budget", "8", "-o",
                  tmp_path / "q.jsonl", env=env)  # fmt: skip
    assert refused.returncode == 1 and "the shouting backend takes no thinking budget" in refused.stderr


def test_every_model_a_run_used_is_on_its_record(monkeypatch, cli, tmp_path):
    """The readers, the judge and query rewriting each keep their model session's record (backend,
    whether it thinks, counters) in what they write."""
    monkeypatch.setattr(
        LLM_BACKENDS, "_entries", {**LLM_BACKENDS._entries, "shouting": "tests.toys.toy_backend:ShoutingBackend"}
    )
    env = {**__import__("os").environ, "IFQA_CACHE_DIR": str(tmp_path / "cache")}
    model = ["--backend", "shouting", "--model", "toy"]
    run, read, judged = tmp_path / "run.jsonl", tmp_path / "read.jsonl", tmp_path / "judged.jsonl"
    commands = {
        run: [
            "retrieve",
            "--query-mode",
            "rewrite",
            "--rewrite-backend",
            "shouting",
            "--rewrite-model",
            "toy",
            "--k",
            "3",
        ],
        read: ["read", "llm", *model],
        judged: ["judge", "--predictions", read, *model],
    }
    for output, args in commands.items():
        result = cli(*args, "-o", output, "--no-progress", env=env)
        assert result.returncode == 0, (args, result.stderr)
    records = [
        json.loads(Path(f"{run}.manifest.json").read_text())["rewriting"],
        json.loads(Path(f"{read}.manifest.json").read_text()),
        json.loads(Path(f"{judged}.manifest.json").read_text()),
    ]
    for record in records:
        assert record["backend"]["backend"] == "shouting" and record["counters"]["requests"] > 0, record
        assert record["thinks"] is False


class _NotInstalled(Backend):
    """A backend whose library is missing: made, it fails as an uninstalled ``openai`` would."""

    @classmethod
    def from_options(cls, model, options):
        raise ModuleNotFoundError("No module named 'openai'", name="openai")


#: Each prompting command with a flag that alone makes it refuse: the refusal comes before any backend
#: is made (the user is told about the flag, not about a library they may not need).
FLAG_REFUSALS = {
    ("read", "llm"): (["--mode", "open"], "open-book reading needs --run"),
    ("read", "iterative"): (["--index", "demo:no-such-index"], "no-such-index"),
    ("judge",): (
        ["--predictions", "{predictions}", "--thinking", "off", "--thinking-budget", "8"],
        "--thinking-budget",
    ),
    ("retrieve",): (["--query-mode", "rewrite"], "needs a model: --rewrite-model"),
    ("serve",): (["--thinking", "off", "--thinking-budget", "8"], "--thinking-budget"),
    ("analyze", "premise"): (["--predictions", "{predictions}", "--twins", "llm"], "give --twin-predictions FILE"),
}


def test_every_refusal_a_flag_alone_decides_comes_before_any_backend(monkeypatch, cli, tmp_path):
    from ifqa.cli import cli as root
    from ifqa.cli.help import leaf_commands

    commands = {tuple(name.split()[1:]): command for name, command in leaf_commands(root)}
    prompting = {path for path, command in commands.items() if any(p.name == "backend" for p in command.params)}
    assert prompting <= set(FLAG_REFUSALS), prompting - set(FLAG_REFUSALS)  # a new prompting command: add its row
    entries = {**LLM_BACKENDS._entries, "openai": "tests.llm.test_protocol:_NotInstalled"}
    monkeypatch.setattr(LLM_BACKENDS, "_entries", entries)
    predictions = tmp_path / "p.jsonl"
    predictions.write_text('{"qid": "1", "prediction": "Paris"}\n')
    for path, (flags, said) in FLAG_REFUSALS.items():
        params = {p.name for p in commands[path].params}
        model = ["--model", "m"] if "model" in params else []
        output = ["-o", tmp_path / f"{'-'.join(path)}.out"] if "output" in params else []
        result = cli(*path, *model, *[a.format(predictions=predictions) for a in flags], *output)
        assert result.returncode == 1 and said in result.stderr and "openai" not in result.stderr, (path, result.stderr)


def test_a_failing_call_stops_its_own_retries_and_never_another_calls():
    """`ifqa serve` runs many calls on one backend at once: a call that fails ends its own requests'
    retry backoffs (``call_stop``), while another call's requests keep waiting and finish."""
    import threading

    import pytest

    from ifqa.llm.generation import concurrently
    from ifqa.llm.protocol import call_stop

    waiting, retrying, ended = threading.Event(), threading.Event(), []

    def beside(i: int) -> bool:  # a request of another call, in a retry backoff
        waiting.set()
        return call_stop().wait(0.3)  # True: its call was stopped

    def failing(i: int) -> bool:
        if i == 0:
            waiting.wait(5) and retrying.wait(5)
            raise RuntimeError("HTTP 400")
        retrying.set()
        ended.append(call_stop().wait(5))  # this call's other request, waiting to retry
        return True

    other: list = []
    thread = threading.Thread(target=lambda: other.extend(concurrently(beside, [1, 2, 3], 1)))
    thread.start()
    with pytest.raises(RuntimeError, match="HTTP 400"):
        list(concurrently(failing, [0, 1], 2))
    thread.join(10)
    assert sorted(other) == [(1, False), (2, False), (3, False)]  # every request of the other call finished
    for _ in range(50):  # the failing call's own waiting request ends at once, not after its 5 s
        if ended:
            break
        threading.Event().wait(0.05)
    assert ended == [True]
