"""One guard for outputs (issue #36): every command's output option, tried against each of that
command's input options (found by walking the command tree, so a command added later is covered
without a new row), through the same path, a symlink, a manifest and folders both ways; and the
API functions that write."""

from __future__ import annotations

import json
from pathlib import Path

import click
import pytest

import ifqa
from ifqa.choices import subcommands
from ifqa.cli import cli, main
from ifqa.errors import IfqaError
from ifqa.outputs import check_output

PRECIOUS = json.dumps([{"idx": 1, "question": "If rivers ran uphill, what then?", "answers": ["x"]}])


def _commands(group: click.Group, path: tuple[str, ...] = ()):
    for name, command in sorted(subcommands(group).items()):
        if isinstance(command, click.Group):
            yield from _commands(command, (*path, name))
        else:
            yield (*path, name), command


def _takes_a_path(param: click.Parameter) -> bool:
    """Options whose value may name a file or folder: paths and free strings (flags, numbers and
    choices cannot, nor a device, which is refused as it is parsed unless it names one)."""
    if getattr(param, "is_flag", False) or getattr(param, "count", False) or getattr(param, "checks_device", False):
        return False
    return isinstance(param.type, click.Path) or param.type is click.STRING


def _folder_only(param: click.Parameter) -> bool:
    return isinstance(param.type, click.Path) and not param.type.file_okay


def _cases():
    for path, command in _commands(cli):
        for output in [p for p in command.params if getattr(p, "writes", False)]:
            for given in command.params:
                if given is not output and _takes_a_path(given) and not getattr(given, "writes", False):
                    ways = ["same", "symlink", "manifest"] if not _folder_only(given) else ["inside"]
                    for way in ways if not _folder_only(output) else ["holding"]:
                        yield pytest.param(
                            path, output.name, given.name, way, id=f"{' '.join(path)}:{given.name}:{way}"
                        )


def _flag(param: click.Parameter) -> str | None:
    return param.opts[0] if isinstance(param, click.Option) else None


def _filler(param: click.Parameter, dummy: Path, folder: Path) -> list[str]:
    """A value that parses for a required option the case does not test."""
    if isinstance(param.type, click.Path):
        value = str(folder if _folder_only(param) else dummy)
    elif isinstance(param.type, click.Choice):
        value = str(param.type.choices[0])
    elif isinstance(param.type, (click.types.IntParamType, click.types.FloatParamType)):
        value = "1"
    else:
        value = "x"
    return [_flag(param), value] if _flag(param) else [value]


CASES = list(_cases())


def test_the_walk_finds_every_command_that_writes():
    commands = {case.values[0] for case in CASES}
    assert {
        ("retrieve",),
        ("read", "llm"),
        ("classify", "causal"),
        ("corpus", "build"),
        ("train", "reranker"),
    } <= commands
    assert {("index", "dense"), ("evaluate",), ("rerank",), ("convert",), ("train", "fid")} <= commands
    assert len(CASES) > 100


@pytest.mark.parametrize("path, output_name, given_name, way", CASES)
def test_an_output_that_is_an_input_is_refused_in_one_line(
    tmp_path, capsys, monkeypatch, path, output_name, given_name, way
):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr("ifqa.redact._secrets", set())  # a path given as --api-key is a secret for this case only
    command = dict(_commands(cli))[path]
    params = {param.name: param for param in command.params}
    output, given = params[output_name], params[given_name]
    _dummies(tmp_path)
    box = tmp_path / "box"
    box.mkdir()
    if _folder_only(given):  # the output is written inside the input folder, or replaces a folder holding it
        victim = box / "input-folder"
        victim.mkdir()
        (victim / "keep.txt").write_text("keep")
        target = victim / "out" if way == "inside" else box
    else:
        victim = box / "input.json"
        victim.write_text(PRECIOUS)
        (box / "input.json.manifest.json").write_text("{}")
        if way == "symlink":
            (tmp_path / "link.json").symlink_to(victim)
        target = {
            "same": box / ".." / "box" / "input.json",
            "symlink": tmp_path / "link.json",
            "manifest": box / "input.json.manifest.json",
            "holding": box,  # a folder output replaced whole, the input inside it
        }[way]
    before = {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}
    code, argv = _run(path, command, given, output, victim, target, tmp_path)
    err = capsys.readouterr().err
    assert code == 1, (argv, err)
    assert len(err.strip().splitlines()) == 1 and err.startswith("ifqa: error: "), (argv, err)
    named = _flag(given) or given.human_readable_name
    assert "the input" in err and named in err, (argv, err)
    assert {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()} == before  # nothing touched


def test_the_guard_follows_hard_links_and_lets_unrelated_paths_through(tmp_path):
    source = tmp_path / "q.json"
    source.write_text(PRECIOUS)
    (tmp_path / "hard.json").hardlink_to(source)
    with pytest.raises(IfqaError, match="is the input --questions"):
        check_output(tmp_path / "hard.json", {"--questions": source})
    check_output(tmp_path / "run.jsonl", {"--questions": source, "--index": "demo:bm25", "--k": 20})


def test_api_writers_refuse_an_output_that_is_an_input(tmp_path):
    questions = tmp_path / "q.json"
    questions.write_text(PRECIOUS)
    question_set = ifqa.load_questions(path=questions)
    with pytest.raises(IfqaError, match="is the input questions"):
        ifqa.read("majority", question_set, output=questions)
    with pytest.raises(IfqaError, match="is the input questions"):
        ifqa.Pipeline(indexes=["demo:bm25"], k=5).run_to_file(question_set, questions)
    assert questions.read_text() == PRECIOUS


def _read_through_cases():
    """Every command's output against each input option given a file or folder whose manifest records
    another file the command reads through it: an index's collection, a run's questions file."""
    for path, command in _commands(cli):
        for output in [p for p in command.params if getattr(p, "writes", False)]:
            if _folder_only(output):
                continue
            for given in command.params:
                if given is output or not _takes_a_path(given) or getattr(given, "writes", False):
                    continue
                file_only = isinstance(given.type, click.Path) and not given.type.dir_okay
                kinds = (
                    ["index folder"]
                    if _folder_only(given)
                    else ["run file"]
                    if file_only
                    else ["run file", "index folder"]
                )
                for kind in kinds:
                    yield pytest.param(path, output.name, given.name, kind, id=f"{' '.join(path)}:{given.name}:{kind}")


READ_THROUGH = list(_read_through_cases())


def _dummies(tmp_path) -> tuple[Path, Path]:
    """A file and a folder for the required options a case does not test."""
    dummy, folder = tmp_path / "dummy.json", tmp_path / "dummy-folder"
    dummy.write_text(PRECIOUS)
    folder.mkdir(exist_ok=True)
    return dummy, folder


def _run(path, command, given, output, victim, target, tmp_path) -> tuple[int, str]:
    dummy, folder = _dummies(tmp_path)
    argv = [*path]
    if given is not None:
        argv += [_flag(given), str(victim)] if _flag(given) else [str(victim)]
    argv += [_flag(output), str(target)]
    for param in command.params:
        if param.required and param not in (output, given):
            argv += _filler(param, dummy, folder)
    try:
        main(argv)
    except SystemExit as exit_:
        return exit_.code, argv
    return 0, argv


@pytest.mark.parametrize("path, output_name, given_name, kind", READ_THROUGH)
def test_an_output_is_never_what_a_command_reads_through_its_inputs(
    tmp_path, capsys, monkeypatch, path, output_name, given_name, kind
):
    """``ifqa retrieve --index ix -o p.jsonl`` where ``ix`` was built from ``p.jsonl``; ``ifqa evaluate
    --run r.jsonl -o q.json`` where ``r.jsonl`` was made for ``q.json``: the recorded file is an input."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr("ifqa.redact._secrets", set())
    command = dict(_commands(cli))[path]
    params = {param.name: param for param in command.params}
    _dummies(tmp_path)
    recorded = tmp_path / "recorded" / "precious.jsonl"
    recorded.parent.mkdir()
    recorded.write_text(PRECIOUS)
    if kind == "index folder":
        victim = tmp_path / "ix"
        victim.mkdir()
        (victim / "manifest.json").write_text(json.dumps({"engine": "bm25s", "corpus": {"path": str(recorded)}}))
    else:
        victim = tmp_path / "run.jsonl"
        victim.write_text("{}\n")
        (tmp_path / "run.jsonl.manifest.json").write_text(json.dumps({"questions": {"name": str(recorded), "n": 1}}))
    before = {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}
    code, argv = _run(path, command, params[given_name], params[output_name], victim, recorded, tmp_path)
    err = capsys.readouterr().err
    assert code == 1 and "the input" in err and len(err.strip().splitlines()) == 1, (argv, err)
    assert {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()} == before


WRITERS = [
    pytest.param(path, output.name, id=" ".join(path))
    for path, command in _commands(cli)
    for output in command.params
    if getattr(output, "writes", False) and not _folder_only(output)
]


@pytest.mark.parametrize("target", ["-", "/dev/null", "fifo"])
@pytest.mark.parametrize("path, output_name", WRITERS)
def test_an_output_that_is_not_a_regular_file_is_refused_by_every_command(
    tmp_path, capsys, monkeypatch, path, output_name, target
):
    """``-o /dev/null`` as root would replace the device with a file (ifqa stages and renames), and
    ``-o -`` would write a file named ``-``: one rule for every command, one line, nothing written."""
    import os

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr("ifqa.redact._secrets", set())
    if target == "fifo":
        os.mkfifo(tmp_path / "fifo")
        target = str(tmp_path / "fifo")
    command = dict(_commands(cli))[path]
    output = {param.name: param for param in command.params}[output_name]
    code, argv = _run(path, command, None, output, None, target, tmp_path)
    err = capsys.readouterr().err
    assert code == 1 and len(err.strip().splitlines()) == 1, (argv, err)
    assert "name a file" in err, (argv, err)
    assert not (tmp_path / "-").exists() and not Path("/dev/null.manifest.json").exists()
    assert Path("/dev/null").is_char_device()


def test_an_index_spec_reads_its_cache_files(tmp_path, monkeypatch, cli):
    """``demo:bm25`` reads the cached collection: a run written over it is refused, like any input."""
    monkeypatch.setenv("IFQA_CACHE_DIR", str(tmp_path / "cache"))
    cached = tmp_path / "cache" / "demo" / "passages.jsonl"
    for spec in ("demo:bm25", "demo:dense"):
        result = cli("retrieve", "--index", spec, "--k", "3", "-o", cached, env={**__import__("os").environ})
        assert result.returncode == 1 and "is the input --index" in result.stderr, result.stderr
    assert not cached.exists()


def test_the_guard_never_raises_on_a_symlink_loop(tmp_path):
    (tmp_path / "a").symlink_to(tmp_path / "b")
    (tmp_path / "b").symlink_to(tmp_path / "a")
    check_output(tmp_path / "out.jsonl", {"--run": tmp_path / "a", "--index": tmp_path / "b"})
    with pytest.raises(IfqaError, match="is the input --run"):
        check_output(tmp_path / "a", {"--run": tmp_path / "a"})


def test_api_writers_refuse_what_their_inputs_read_through(tmp_path):
    """``Pipeline.run_to_file`` over an index built from the output, ``Reranker.rerank_run`` over a run
    made for the questions file it would write over."""
    from ifqa.outputs import check_output as guard

    collection = tmp_path / "p.jsonl"
    collection.write_text("{}\n")
    index = tmp_path / "ix"
    index.mkdir()
    (index / "manifest.json").write_text(json.dumps({"corpus": {"path": str(collection)}}))
    with pytest.raises(IfqaError, match="is the input indexes"):
        guard(collection, {"indexes": [str(index)]}, "output")
    questions = tmp_path / "q.json"
    questions.write_text(PRECIOUS)
    question_set = ifqa.load_questions(path=questions)
    with pytest.raises(IfqaError, match="the input"):
        ifqa.Pipeline(indexes=["demo:bm25"], k=5).run_to_file(question_set, questions)


ALL_WRITERS = [
    pytest.param(path, output.name, id=" ".join(path))
    for path, command in _commands(cli)
    for output in command.params
    if getattr(output, "writes", False)
]


@pytest.mark.parametrize("path, output_name", ALL_WRITERS)
def test_an_index_spec_is_never_an_output_path(tmp_path, capsys, monkeypatch, path, output_name):
    """``ifqa index dense --index demo:dense`` (the old spelling of -o) made a folder named ``demo:dense``."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr("ifqa.redact._secrets", set())
    command = dict(_commands(cli))[path]
    output = {param.name: param for param in command.params}[output_name]
    code, argv = _run(path, command, None, output, None, "demo:dense", tmp_path)
    err = capsys.readouterr().err
    assert code == 1 and "an index spec names an index to read" in err, (argv, err)
    assert not (tmp_path / "demo:dense").exists()


@pytest.mark.parametrize("path, output_name", WRITERS)
def test_every_command_says_when_it_replaces_an_existing_file(tmp_path, caplog, monkeypatch, path, output_name):
    """One overwrite rule, decided in one place (cli/options.say_replaced): an existing output file is
    replaced once the new one is complete, and the command says so first."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr("ifqa.redact._secrets", set())
    command = dict(_commands(cli))[path]
    output = {param.name: param for param in command.params}[output_name]
    target = tmp_path / "existing.out"
    target.write_text("old\n")
    with caplog.at_level("INFO", logger="ifqa"):
        _run(path, command, None, output, None, str(target), tmp_path)
    assert f"{target} exists: it is replaced once the new one is complete" in caplog.text


FOLDER_WRITERS = [
    pytest.param(path, output.name, id=" ".join(path))
    for path, command in _commands(cli)
    for output in command.params
    if getattr(output, "writes", False) and _folder_only(output)
]


def test_the_walk_finds_every_command_that_writes_a_folder():
    assert {("train", "fid"), ("train", "llm"), ("train", "reranker"), ("index", "dense"), ("analyze", "premise")} <= {
        p.values[0] for p in FOLDER_WRITERS
    }


@pytest.mark.parametrize("path, output_name", FOLDER_WRITERS)
def test_a_folder_holding_what_the_command_did_not_write_is_refused(tmp_path, capsys, monkeypatch, path, output_name):
    """A folder output holding anything that none of the command's own records marks (a user's ``last/``
    with a NOTE.txt, issue #77) is refused in one line, and left as it was: never trained into or replaced."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr("ifqa.redact._secrets", set())
    command = dict(_commands(cli))[path]
    output = {param.name: param for param in command.params}[output_name]
    target = tmp_path / "theirs"
    for folder in ("last", "best"):
        (target / folder).mkdir(parents=True)
    (target / "last" / "NOTE.txt").write_text("mine")
    code, argv = _run(path, command, None, output, None, str(target), tmp_path)
    err = capsys.readouterr().err
    assert code == 1 and len(err.strip().splitlines()) == 1 and "did not write" in err, (argv, err)
    assert sorted(p.name for p in target.rglob("*")) == ["NOTE.txt", "best", "last"]
    assert (target / "last" / "NOTE.txt").read_text() == "mine"


@pytest.mark.parametrize("path, output_name", FOLDER_WRITERS)
def test_a_users_file_at_any_depth_of_a_folder_output_is_never_written_over(
    tmp_path, capsys, monkeypatch, path, output_name
):
    """A user's NOTE.txt at the top of a folder output, or inside any subfolder the command replaces whole
    (``replaces``: train reranker's model/, train llm's best/ and last/ ...), alone or beside the command's
    own records: refused in one line, the file left as it was (issue #84)."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr("ifqa.redact._secrets", set())
    command = dict(_commands(cli))[path]
    output = {param.name: param for param in command.params}[output_name]
    record = next((name for name in output.owns if "/" not in name and "*" not in name), None)
    cases = [("", None)] + [(sub, None) for sub in output.replaces] + [(sub, record) for sub in output.replaces]
    for n, (place, ours) in enumerate(cases):
        target = tmp_path / f"theirs-{n}"
        (target / place).mkdir(parents=True)
        (target / place / "NOTE.txt").write_text("mine")
        if ours:
            (target / ours).mkdir() if ours == "state" else (target / ours).write_text("{}")
        code, argv = _run(path, command, None, output, None, str(target), tmp_path)
        err = capsys.readouterr().err
        assert code == 1 and len(err.strip().splitlines()) == 1 and "did not write" in err, (argv, err)
        assert (target / place / "NOTE.txt").read_text() == "mine"


def test_an_experiments_output_folder_holding_a_users_file_is_refused(cli, tmp_path):
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "NOTE.txt").write_text("mine")
    config = tmp_path / "e.yaml"
    config.write_text(
        "name: e\nquestions: {setting: demo, split: dev}\noutput: out\nk: 5\nretrievers:\n  - {name: bm25, indexes: ['demo:bm25']}\n"
    )
    result = cli("experiment", "run", config)
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 1 and len(lines) == 1 and "did not write" in lines[0], result.stderr
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["NOTE.txt"]
