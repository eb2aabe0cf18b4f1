import json
import resource
import subprocess
import sys

import pytest

from ifqa.choices import subcommands
from ifqa.datasets.demo import load_demo


def test_help_is_fast_and_imports_nothing_heavy():
    """CPU seconds, not wall seconds: a loaded CI host stretches the clock, not the work."""
    code = "import sys, time; t=time.process_time(); from ifqa.cli import cli; print(time.process_time()-t); print(sorted(m for m in sys.modules if m.split('.')[0] in {'numpy','torch','transformers','bm25s','faiss','pyserini','openai','rich_click','rich'}))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split("\n")
    assert float(out[0]) < 0.3
    assert out[1] == "[]"
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    result = subprocess.run([sys.executable, "-m", "ifqa.cli", "--help"], capture_output=True, text=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    assert result.returncode == 0 and "evaluate" in result.stdout
    cpu_seconds = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    assert cpu_seconds < 2.0  # interpreter start-up included


def _predictions(path, pairs):
    path.write_text("".join(json.dumps({"qid": q, "prediction": p}) + "\n" for q, p in pairs))
    return path


def test_evaluate_predictions_json_and_table(cli, tmp_path):
    dev = load_demo("dev")
    good = _predictions(tmp_path / "a.jsonl", [(e.qid, e.answers[0]) for e in dev])
    half = _predictions(tmp_path / "b.jsonl", [(e.qid, e.answers[0] if i % 2 else "wrong") for i, e in enumerate(dev)])
    result = cli("evaluate", "--predictions", good, "--setting", "demo", "--split", "dev", "--json")
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["n"] == 24 and report["em"] == 100.0 and report["f1"] == 100.0
    result = cli("evaluate", "--predictions", good, "--compare", half, "--output", tmp_path / "metrics.json")
    assert result.returncode == 0, result.stderr
    assert "EM" in result.stdout and "answer type" in result.stdout and "p (paired permutation)" in result.stdout
    compare = json.loads((tmp_path / "metrics.json").read_text())["compare"]
    assert compare["em"] == 50.0 and compare["em_difference"]["difference"] == 50.0
    assert compare["em_difference"]["p_value"] < 0.01


def test_evaluate_run(cli, tmp_path):
    dev = load_demo("dev")
    run = tmp_path / "run.jsonl"
    with open(run, "w") as handle:
        for example in dev:
            ctxs = [
                {"id": "x", "title": "", "text": "unrelated words only"},
                {"id": "g", "title": "", "text": example.context[0]},
            ]
            handle.write(
                json.dumps({"qid": example.qid, "question": example.question, "answers": example.answers, "ctxs": ctxs})
                + "\n"
            )
    result = cli("evaluate", "--run", run, "--setting", "demo", "--json")
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["recall"]["gold"] == {"1": 0.0, "2": 100.0}
    table = cli("evaluate", "--run", run, "--setting", "demo").stdout
    assert "gold" in table and "@2" in table


def test_bad_inputs_give_one_line_errors_and_no_output(cli, tmp_path):
    bad = tmp_path / "p.jsonl"
    bad.write_text('{"qid": "0", "prediction": "x"}\n{"qid": "1"}\n')
    out = tmp_path / "metrics.json"
    result = cli("evaluate", "--predictions", bad, "--output", out)
    assert result.returncode == 1
    assert result.stderr.strip() == f"ifqa: error: {bad}:2: each line needs 'qid' and 'prediction'"
    assert not out.exists()
    bad.write_text('{"qid": "0", "prediction": "x"\n')
    result = cli("evaluate", "--predictions", bad)
    assert result.returncode == 1 and "p.jsonl:1: invalid JSON" in result.stderr and "Traceback" not in result.stderr
    result = cli("evaluate", "--predictions", tmp_path / "missing.jsonl")
    assert result.returncode == 1 and "no such file" in result.stderr
    result = cli("evaluate")
    assert result.returncode == 1 and "exactly one of --predictions or --run" in result.stderr


def test_data_stats_on_demo(cli):
    result = cli("data", "stats", "--json")
    assert result.returncode == 0, result.stderr
    stats = json.loads(result.stdout)
    assert stats["n"] == 24 and sum(stats["answer_types"].values()) == 24


def test_logging_flags_work_after_the_subcommand(cli, tmp_path):
    from ifqa.cli import hoist_global_flags

    assert hoist_global_flags(["retrieve", "--k", "3", "-q"]) == ["-q", "retrieve", "--k", "3"]
    assert hoist_global_flags(["read", "-vv", "--", "-q"]) == ["-vv", "read", "--", "-q"]
    result = cli("retrieve", "--k", "3", "-o", tmp_path / "r.jsonl", "--no-progress", "-q")
    assert result.returncode == 0 and result.stderr == ""


def test_every_option_says_what_it_does():
    import click

    from ifqa.cli import cli as group

    missing = []

    def walk(command, path):
        for name, sub in subcommands(command).items():
            walk(sub, path + [name])
        missing.extend(
            f"{' '.join(path)} {p.opts[0]}"
            for p in command.params
            if isinstance(p, click.Option) and not p.help and not p.hidden
        )

    walk(group, ["ifqa"])
    assert missing == []


def test_inputs_and_outputs_are_spelled_the_same_on_every_command():
    """What a command writes is -o/--output; the run it reads is --run; earlier spellings parse but are not shown."""
    import click

    from ifqa.cli import cli as group

    outputs, runs = {}, {}

    def walk(command, path):
        for name, sub in subcommands(command).items():
            walk(sub, path + [name])
        with click.Context(command) as ctx:
            for p in command.params:
                if isinstance(p, click.Option) and p.name in ("output", "index_dir"):
                    outputs[" ".join(path)] = p.get_help_record(ctx)[0]
                if isinstance(p, click.Option) and "--run" in p.opts:
                    runs[" ".join(path)] = p.get_help_record(ctx)[0]

    walk(group, ["ifqa"])
    assert {
        "ifqa index bm25",
        "ifqa index dense",
        "ifqa evaluate",
        "ifqa rerank",
        "ifqa convert",
        "ifqa retrieve",
    } <= set(outputs)
    assert all(shown.startswith("-o, --output ") for shown in outputs.values()), outputs
    assert {"ifqa rerank", "ifqa convert", "ifqa evaluate", "ifqa read llm", "ifqa train fid"} <= set(runs)
    assert all(shown.startswith("--run FILE") for shown in runs.values()), runs


def test_earlier_spellings_still_work(cli, tmp_path):
    corpus = tmp_path / "passages.jsonl"
    corpus.write_text(
        "".join(json.dumps({"id": f"p{i}", "title": "T", "text": f"river number {i}"}) + "\n" for i in range(4))
    )
    assert cli("index", "bm25", "--corpus", corpus, "--index", tmp_path / "old", "--no-progress").returncode == 0
    assert cli("index", "bm25", "--corpus", corpus, "-o", tmp_path / "new", "--no-progress").returncode == 0
    assert (tmp_path / "old" / "offsets.npy").read_bytes() == (tmp_path / "new" / "offsets.npy").read_bytes()
    run = tmp_path / "run.jsonl"
    assert cli("retrieve", "--k", "2", "-o", run, "--no-progress").returncode == 0
    assert cli("convert", run, "--to", "trec", "-o", tmp_path / "old.trec").returncode == 0
    assert cli("convert", "--run", run, "--to", "trec", "-o", tmp_path / "new.trec").returncode == 0
    assert (tmp_path / "old.trec").read_text() == (tmp_path / "new.trec").read_text()
    result = cli("convert", "--run", run, tmp_path / "other.jsonl", "--to", "trec", "-o", tmp_path / "x.trec")
    assert result.returncode != 0 and "two runs given" in result.stderr
    result = cli("rerank", "--model", "m", "-o", tmp_path / "x.jsonl")
    assert (
        result.returncode != 0
        and "Missing option '--run'" in result.stderr
        and len(result.stderr.strip().splitlines()) == 1
    )


def test_a_group_without_a_command_shows_its_help_and_usage_errors_exit_1(cli):
    """`ifqa` and `ifqa train` alone print their help (exit 0), not one squashed error line; an
    unknown option or a value out of range is bad input: one line, exit status 1 as the README says."""
    for args in ([], ["train"]):
        result = cli(*args)
        assert (
            result.returncode == 0 and result.stdout.strip().startswith("Usage: ifqa") and "Commands" in result.stdout
        )
        assert result.stderr == ""
    for args, words in ((["retrieve", "--k", "0"], "--k"), (["retrieve", "--nope"], "No such option")):
        result = cli(*args)
        assert result.returncode == 1 and len(result.stderr.strip().splitlines()) == 1 and words in result.stderr


@pytest.mark.parametrize(
    "flags, root, ours", [([], "WARNING", "INFO"), (["-v"], "INFO", "INFO"), (["-q"], "WARNING", "WARNING")]
)
def test_libraries_log_only_warnings_unless_asked(flags, root, ours, capsys):
    """Issue #35: ONNX Runtime's quantizer logged 37 INFO lines through the root logger during an
    export; libraries' INFO (any logger not ifqa's) shows only with -v."""
    import logging

    from ifqa.cli import main

    saved = {name: logging.getLogger(name).level for name in ("", "ifqa")}
    try:
        main([*flags, "data", "stats", "--setting", "demo", "--json"])
        assert logging.getLevelName(logging.getLogger().level) == root
        assert logging.getLevelName(logging.getLogger("ifqa").getEffectiveLevel()) == ours
        assert logging.getLogger("onnxruntime.quantization").getEffectiveLevel() >= logging.getLevelName(root)
    finally:
        for name, level in saved.items():
            logging.getLogger(name).setLevel(level)


def test_under_torchrun_the_one_line_cause_goes_to_the_launchers_error_file(tmp_path, cli):
    """torchrun's summary shows what a failed rank wrote to TORCHELASTIC_ERROR_FILE (the format of
    torch.distributed.elastic's @record): the cause, not the launcher's own traceback."""
    import json
    import os

    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError, ProcessFailure

    error_file = tmp_path / "error.json"
    env = {**os.environ, "TORCHELASTIC_ERROR_FILE": str(error_file)}
    result = cli("retrieve", "--k", "0", env=env)
    assert result.returncode == 1
    line = result.stderr.strip()
    assert json.loads(error_file.read_text())["message"]["message"] == line
    failure = ProcessFailure(local_rank=0, pid=1, exitcode=1, error_file=str(error_file))
    assert line in ChildFailedError("ifqa", {0: failure}).format_msg()  # the launcher's summary


def test_help_pages_group_options_list_choices_and_show_an_example(cli):
    """Every command's page: options grouped by what they are for (a rule by name, so a new option
    joins a group), choices listed, defaults in one style, one example (the list is walked)."""
    from ifqa.cli import cli as root
    from ifqa.cli.help import EXAMPLES, leaf_commands, option_groups

    paths = {path for path, _ in leaf_commands(root)}
    assert set(EXAMPLES) == paths  # one example for every command, and none for a command that is gone
    for path, command in leaf_commands(root):
        groups = option_groups(command)
        assert sum(len(g["options"]) for g in groups) == sum(
            1 for p in command.params if getattr(p, "opts", [""])[0].startswith("-") and not getattr(p, "hidden", False)
        )
        assert EXAMPLES[path].split()[0] in ("ifqa", "torchrun")
    serve = " ".join(cli("serve", "--help").stdout.replace("│", " ").split())
    assert serve.index("Server") < serve.index("Input") < serve.index("Runtime") and serve.index(
        "--host"
    ) < serve.index("--corpus")
    assert "Example: ifqa serve" in serve and "[default: 8000]" in serve
    train = " ".join(cli("train", "reranker", "--help").stdout.replace("│", " ").split())
    assert "(question|premise|" in train.replace(" ", "")  # --query-mode lists its choices
    assert "ifqa_card.json" in train and "model_card.json" not in train


def _renamed_options():
    """``(command path, former flag, new flag)`` of every renamed option (walked, so a new one is covered)."""
    from ifqa.choices import AliasedOption
    from ifqa.cli import cli as root
    from ifqa.cli.help import leaf_commands

    return [
        (path.split()[1:], alias, next(o for o in param.opts if o not in param.hidden_aliases))
        for path, command in leaf_commands(root)
        for param in command.params
        if isinstance(param, AliasedOption) and param.renamed
        for alias in param.hidden_aliases
    ]


def test_renamed_options_are_the_ones_meant():
    """One meaning per name: --engine is a retrieval engine, --runtime a CPU export, --backend an LLM endpoint."""
    renamed = {(" ".join(path), old, new) for path, old, new in _renamed_options()}
    assert ("index bm25", "--backend", "--engine") in renamed
    assert {("index dense", "--backend", "--runtime"), ("rerank", "--backend", "--runtime")} <= renamed
    assert {
        ("retrieve", "--rerank-backend", "--rerank-runtime"),
        ("serve", "--rerank-backend", "--rerank-runtime"),
    } <= renamed


@pytest.mark.parametrize("path, old, new", _renamed_options(), ids=lambda v: v if isinstance(v, str) else " ".join(v))
def test_a_former_option_name_works_and_says_the_new_one_once(cli, path, old, new):
    """Given by its former name (twice here), an option is the new one (a bad value is refused under
    the new name) and the command says the new name, once."""
    result = cli(*path, old, "no-such-choice", old, "no-such-choice")
    assert result.stderr.count(f"{old} is now {new}") == 1, result.stderr
    assert result.returncode == 1 and f"Invalid value for '{new}'" in result.stderr


def _ifqa_modules_after(args: list[str]) -> list[str]:
    """The ifqa modules a fresh interpreter has loaded after running ``ifqa ARGS``."""
    code = (
        "import sys, atexit\n"
        "atexit.register(lambda: print('MODULES', sorted(m for m in sys.modules if m.split('.')[0] == 'ifqa')))\n"
        f"from ifqa.cli import main\nmain({args!r})\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True).stdout
    return json.loads(out.split("MODULES ", 1)[1].replace("'", '"'))


def test_a_command_loads_only_itself(tmp_path):
    """`ifqa retrieve` imports retrieval, and nothing of the readers, the judge, the analyses, the LLM
    layer or training; `ifqa --help` lists every command without importing one."""
    args = ["retrieve", "--k", "3", "-o", str(tmp_path / "r.jsonl"), "--no-progress", "-q"]
    _ifqa_modules_after(args)  # the demo index built on first use: its build is not a search's cost
    loaded = _ifqa_modules_after(args)
    # 45, the model options query rewriting declares, ifqa.environment, supervise (the memory-limit
    # supervisor, asked first) and hub_reach (asked before a hub id loads)
    assert len(loaded) <= 49, loaded
    banned = ("ifqa.judge", "ifqa.llm", "ifqa.analysis", "ifqa.readers", "ifqa.training")
    assert not [m for m in loaded if m.startswith(banned)]
    listed = _ifqa_modules_after(["--help"])
    assert not [m for m in listed if m.startswith("ifqa.cli.") and m not in ("ifqa.cli.help", "ifqa.cli.options")]


def test_the_command_table_is_the_commands():
    """Each command in ``COMMAND_TABLE`` is the module of its name's, listed by its own first help line, and every
    command module's commands are in the table."""
    import importlib
    from pathlib import Path

    import click

    from ifqa.cli import COMMAND_TABLE

    found = {}
    for path in sorted((Path(__file__).resolve().parents[1] / "ifqa" / "cli").glob("[a-z]*.py")):
        module = importlib.import_module(f"ifqa.cli.{path.stem}")
        for command in getattr(module, "COMMANDS", []):
            found[command.name] = (path.stem, command)
    assert set(found) == set(COMMAND_TABLE)
    for name, line in COMMAND_TABLE.items():
        assert found[name][0] == name
        real = found[name][1].help
        for limit in (45, 80, 200):
            assert click.Command(name, help=line).get_short_help_str(limit) == click.Command(
                name, help=real
            ).get_short_help_str(limit)


def test_every_command_parses_the_same_after_a_launchers_separator(cli):
    """The launchers' documented form (``torchrun ... -m ifqa -- train fid ...``, ``python -m ifqa --
    CMD``, a global flag then ``--``) is the command as typed without the ``--``: walked over every
    command, by its help page and by a usage error, each of which the command's own parser gives."""
    from ifqa.cli import cli as root
    from ifqa.cli import command_separator_dropped
    from ifqa.cli.help import leaf_commands

    assert command_separator_dropped(["-q", "--", "retrieve", "--", "-x"]) == ["-q", "retrieve", "--", "-x"]
    assert command_separator_dropped(["retrieve", "--", "-x"]) == ["retrieve", "--", "-x"]
    for name, _ in leaf_commands(root):
        path = name.split()[1:]
        for ask in (["--help"], ["--no-such-option"]):
            typed = cli(*path, *ask)
            for prefix in (["--"], ["-q", "--"]):
                launched = cli(*prefix, *path, *ask)
                assert (launched.returncode, launched.stdout, launched.stderr) == (
                    typed.returncode,
                    typed.stdout,
                    typed.stderr,
                ), (prefix, path, ask)
        doubled = cli("--", "--", *path, "--no-such-option")  # undocumented: refused, never a real option blamed
        assert doubled.returncode == 1 and doubled.stderr.count("\n") == 1 and "'-- --'" in doubled.stderr


def test_every_help_page_lists_each_option_once(cli):
    """Each option in one panel of its command's page (issue #69: an option no rule claimed made
    rich-click's own "Options" panel collect every option a second time), walked over every command."""
    import re

    from ifqa.cli import cli as root
    from ifqa.cli.help import leaf_commands

    for name, command in leaf_commands(root):
        page = cli(*name.split()[1:], "--help").stdout
        listed = re.findall(r"^│\s{1,12}(?:\*\s+)?(?:-\w,?\s+)?(--[\w-]+)", page, re.M)  # the option column
        shown = {
            p.opts[0] if p.opts[0].startswith("--") else p.opts[-1]
            for p in command.params
            if not getattr(p, "hidden", False)
        }
        assert sorted(set(listed)) == sorted(listed), (name, sorted({o for o in listed if listed.count(o) > 1}))
        assert {o for o in shown if o.startswith("--")} <= set(listed), (name, shown - set(listed))


def test_a_stop_says_rerun_to_resume_except_for_a_server():
    """SIGTERM to ``ifqa serve`` ends a server: no "rerun the same command to resume" (walked)."""
    from ifqa.cli import _resumes
    from ifqa.cli import cli as root
    from ifqa.cli.help import leaf_commands

    servers = [name for name, _ in leaf_commands(root) if not _resumes(name.split()[1:])]
    assert servers == ["ifqa serve"]
    assert not _resumes(["--quiet", "serve", "--port", "8001"]) and _resumes(["train", "llm", "--run", "r"])


def test_no_progress_silences_every_bar_on_every_command():
    """``--no-progress`` is walked: each command's flag silences the libraries' bars too (issue #77:
    ``ifqa train fid --no-progress`` still drew transformers' "Loading weights" bar)."""
    from ifqa.cli import cli as root
    from ifqa.cli.help import leaf_commands

    flags = [(name, p) for name, c in leaf_commands(root) for p in c.params if p.name == "no_progress"]
    assert len(flags) > 15 and all(getattr(p, "silences", False) for _, p in flags)


@pytest.mark.slow
def test_a_training_run_without_progress_draws_no_bar(tmp_path):
    from tests.conftest import run_cli_process
    from tests.readers.tiny_models import tiny_t5

    run = tmp_path / "run.jsonl"
    record = {"qid": "0", "question": "If so, what?", "answers": ["x"], "ctxs": [{"id": "1", "title": "", "text": "x"}]}
    run.write_text(json.dumps(record) + "\n")
    args = ["train", "fid", "--run", run, "--model", tiny_t5(tmp_path / "t5"), "--steps", "1", "--batch-size", "1"]
    result = run_cli_process(*args, "--n-context", "1", "-o", tmp_path / "out", "--no-progress")
    assert result.returncode == 0, result.stderr
    assert "%|" not in result.stderr and "Loading weights" not in result.stderr, result.stderr


def test_an_error_after_an_unfinished_bar_starts_a_line_of_its_own(capsys):
    """With stderr not a terminal a bar's updates end in "\\r": the one-line error must not share its line
    (issue #77: ifqa judge and ifqa index dense --ray printed it after the bar)."""
    import sys

    from ifqa.cli import LineEnds, _say

    real = sys.stderr
    sys.stderr = LineEnds(real)
    try:
        sys.stderr.write("judge:  40%|####      | 4/10\r")
        _say("ifqa: error: the endpoint went away")
        sys.stderr.write("done\n")
        _say("ifqa: error: again")
    finally:
        sys.stderr = real
    assert capsys.readouterr().err.split("\n") == [
        "judge:  40%|####      | 4/10\r",
        "ifqa: error: the endpoint went away",
        "done",
        "ifqa: error: again",
        "",
    ]


@pytest.mark.parametrize("name", ["fid", "llm"])
def test_no_bf16_is_read_as_precision_fp32_and_refused_beside_another_precision(name, cli, tmp_path, monkeypatch):
    """`--no-bf16` (train fid's spelling before `--precision`, every train command's option) trains as
    `--precision fp32`, with a warning, for each command trained on a run file; beside `--precision bf16`
    it is one line and nothing is trained."""
    from ifqa.training.kinds import RunKind

    trained = []

    def capture(self, recipe, job):
        trained.append(recipe.precision)
        return {"finished": False, "step": 0, "steps": 1}

    monkeypatch.setattr(RunKind, "train", capture)
    run = tmp_path / "run.jsonl"
    run.write_text("")
    common = ["train", name, "--run", run, "-o", tmp_path / "out"]
    old = cli(*common, "--no-bf16")
    assert old.returncode == 0 and trained == ["fp32"], old.stderr
    assert "--no-bf16 is now --precision fp32" in old.stderr
    assert cli(*common, "--no-bf16", "--precision", "fp32").returncode == 0 and trained == ["fp32", "fp32"]
    refused = cli(*common, "--no-bf16", "--precision", "bf16")
    assert refused.returncode == 1 and trained == ["fp32", "fp32"]
    assert refused.stderr.strip().splitlines() == [
        "ifqa: error: --no-bf16 (now --precision fp32) contradicts --precision bf16"
    ], refused.stderr
