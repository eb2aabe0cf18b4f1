"""Options shared by several commands: which questions, and choices read from the registries."""

from __future__ import annotations

import functools
import logging
import os

import click

from ifqa.choices import AliasedOption, RegistryChoice, each_command
from ifqa.configs import click_options, from_options, option_fields
from ifqa.datasets import QuestionSource
from ifqa.devices import pick_device
from ifqa.errors import IfqaError
from ifqa.outputs import check_folder_owned, check_output
from ifqa.registry import DATASETS, RuntimeNames
from ifqa.retrieval.config import RetrievalConfig

SPLIT_CHOICES = click.Choice(["train", "dev", "test"])


#: a command's attribute: it runs until it is stopped (a server), so a stop is its end, not a pause to resume
RUNS_UNTIL_STOPPED = "runs_until_stopped"


def question_options_for(setting: str = "demo", split: str = "dev", recorded: bool = False):
    """--setting/--split/--questions/--data-dir: how every command that needs questions names them;
    the help states the command's own defaults (training commands: supervised train; commands that
    read a run or predictions: the set their manifest records)."""
    first = "the set the input's manifest records, else " if recorded else ""

    def decorate(function):
        function = click.option(
            "--data-dir",
            type=click.Path(file_okay=False),
            help="IfQA cache (default $IFQA_DATA_DIR or ~/.cache/ifqa/data).",
        )(function)
        function = click.option(
            "--questions",
            type=click.Path(dir_okay=False),
            help="Any file in the IfQA format (JSON list or JSONL), or a Hugging Face dataset: hf:OWNER/NAME or "
            "hf:FOLDER (?split=dev&config=C&fields=question:query,answers:golden_answers); overrides --setting/--split.",
        )(function)
        function = click.option(
            "--split", type=SPLIT_CHOICES, default=None, help=f"Split (default: {first}the setting's {split})."
        )(function)
        return click.option(
            "--setting",
            type=RegistryChoice(DATASETS),
            default=None,
            help="IfQA supervised (full_split), few-shot (few_split), the embedded demo set; wiqa, "
            f"causalqa[-random] and their -demo sets (default: {first}{setting}). With --questions: the "
            "file's format.",
        )(function)

    return decorate


question_options = question_options_for()
recorded_question_options = question_options_for(recorded=True)


class OutputOption(AliasedOption):
    """What a command writes: ``guard_outputs`` checks it against every other option first; a folder's
    ``owns`` are the names whose presence says this command made it (``outputs.check_folder_owned``)."""

    writes = True

    def __init__(self, param_decls, owns: tuple[str, ...] = (), replaces: dict | None = None, **attrs):
        super().__init__(param_decls, **attrs)
        self.owns, self.replaces = owns, replaces or {}


def count_option(flag: str, help: str, default: int | None = None):
    """A whole-number option of at least 1 (its default shown when it has one)."""
    return click.option(flag, default=default, show_default=default is not None, type=click.IntRange(min=1), help=help)


def output_option(
    help: str,
    name: str = "output",
    folder: bool = False,
    required: bool = True,
    aliases: tuple[str, ...] = (),
    owns: tuple[str, ...] = (),
    replaces: dict[str, tuple[str, ...]] | None = None,
):
    """``-o/--output``: what a command writes, spelled the same on every command (``aliases``: earlier
    spellings, still accepted). A folder output names what marks it as this command's own (``owns``):
    an existing folder holding anything, but none of them, is refused; so is a subfolder it replaces
    whole (``replaces``: each with its own marks) that holds anything but them."""
    if folder and not owns:
        raise ValueError("a folder output names the files that mark it as the command's own (owns=)")
    return click.option(
        "--output",
        "-o",
        *aliases,
        name,
        cls=OutputOption,
        hidden_aliases=aliases,
        required=required,
        type=click.Path(file_okay=not folder, dir_okay=folder),
        help=help,
        owns=owns,
        replaces=replaces,
    )


class HiddenArgument(click.Argument):
    """A positional argument kept for earlier scripts, left out of the usage line (its option is shown)."""

    def get_usage_pieces(self, ctx) -> list[str]:
        return []


def run_input(help: str):
    """``--run FILE``: the run a command reads, as on ``ifqa read`` and ``ifqa evaluate`` (a positional
    RUN, the earlier spelling of ``ifqa rerank`` and ``ifqa convert``, still works)."""

    def decorate(function):
        function = click.argument("run_argument", required=False, cls=HiddenArgument, type=click.Path(dir_okay=False))(
            function
        )
        return click.option("--run", "run_option", type=click.Path(dir_okay=False), help=help)(function)

    return decorate


def given_run(run_option: str | None, run_argument: str | None) -> str:
    """The run named by ``--run`` or positionally: one line when neither or two different ones are given."""
    if run_option and run_argument and run_option != run_argument:
        raise click.UsageError(f"two runs given: --run {run_option} and {run_argument}")
    if not (run_option or run_argument):
        raise click.UsageError("Missing option '--run'.")
    return run_option or run_argument


def question_source(setting, split, questions, data_dir) -> QuestionSource:
    return QuestionSource(setting, split, questions, data_dir)


def runtime_options(what: str):
    """``--runtime torch|onnx|openvino|auto`` and ``--quantize int8``; ``--backend``, the runtime's
    first name, still parses and says the new one."""

    def decorate(function):
        function = click.option(
            "--quantize",
            type=click.Choice(["int8"]),
            help=f"{what} with int8 weights (needs --runtime onnx, openvino or auto; checked "
            "against the fp32 model on a probe batch).",
        )(function)
        return click.option(
            "--runtime",
            "--backend",
            "runtime",
            cls=AliasedOption,
            hidden_aliases=("--backend",),
            renamed=True,
            type=RegistryChoice(RuntimeNames()),
            default="torch",
            show_default=True,
            help=f"{what} on PyTorch (any device), or exported once to ONNX Runtime or OpenVINO for "
            "the CPU (cached; pip install 'ifqa[onnx]' or 'ifqa[openvino]'); auto: the export measured "
            "fastest on this kind of CPU (with int8: OpenVINO given VNNI or AMX, else ONNX Runtime).",
        )(function)

    return decorate


def retrieval_options(defaults: dict | None = None, exclude: tuple[str, ...] = ()):
    """Every ``RetrievalConfig`` field as an option (generated from its declaration), and
    ``--rerank-quantize`` (``--rerank-runtime onnx --rerank-quantize int8`` reads ``onnx-int8``)."""

    def decorate(function):
        function = click.option(
            "--rerank-quantize",
            type=click.Choice(["int8"]),
            help="Reranking with int8 weights (needs --rerank-runtime onnx, openvino or auto).",
        )(function)
        return click_options(RetrievalConfig, defaults, exclude)(function)

    return decorate


def retrieval_config(options: dict, defaults: dict | None = None, **fixed):
    """The ``RetrievalConfig`` of a command's options (``retrieval_options``); its own ``defaults``
    for what was not given, and ``fixed`` values for the fields it sets another way."""
    defaults = defaults or {}
    names = {f.name for f in option_fields(RetrievalConfig)}
    values = {
        name: defaults.get(name) if value is None or value == () else value
        for name, value in options.items()
        if name in names
    }
    quantize = options.get("rerank_quantize")
    if quantize:
        values["rerank_runtime"] = runtime_label(values.get("rerank_runtime") or "torch", quantize, "rerank-")
    return from_options(RetrievalConfig, {**values, **fixed})


def runtime_label(runtime: str, quantize: str | None, prefix: str = "") -> str:
    """What ``exported.Runtime.parse`` reads, checked here so a bad pair is one line before any work,
    naming the options as this command spells them (``--rerank-quantize`` on retrieve and serve)."""
    import re

    from ifqa.retrieval.exported import Runtime  # the exports' code, for --runtime alone

    try:
        return Runtime(runtime, quantize).label
    except IfqaError as exc:
        if not prefix:
            raise
        raise IfqaError(re.sub(r"--(runtime|quantize)\b", rf"--{prefix}\1", str(exc))) from None


def say_replaced(output) -> None:
    """The one overwrite rule (docs/ARCHITECTURE.md, "Outputs"), said where it applies: an existing
    file is replaced, whole, once the new one is complete."""
    if output and os.path.isfile(output):
        logging.getLogger("ifqa").info("%s exists: it is replaced once the new one is complete", output)


def check_devices(command: click.Command) -> None:
    """Make every ``--device`` of ``command`` (and its subcommands) checked as it is parsed
    (``devices.pick_device``: its form, then this machine's GPUs): one check, so a command added later
    is covered by naming its option ``device`` (or ``..._device``), and a bad one is one line before anything is read or written."""
    if isinstance(command, click.Group):
        each_command(command, check_devices)
        return
    for param in command.params:
        if (param.name == "device" or param.name.endswith("_device")) and not getattr(param, "checks_device", False):
            given = param.callback

            def checked(ctx, param, value, given=given):
                try:
                    if value:  # torch is imported only when a device is named
                        pick_device(value)
                except IfqaError as exc:
                    problem = str(exc).split(": ", 1)[-1].replace("--device", param.opts[0])  # its own flag
                    raise click.BadParameter(f"{value!r}: {problem}", ctx, param) from None
                return given(ctx, param, value) if given else value

            param.callback, param.checks_device = checked, True  # type: ignore[attr-defined]


#: what silences the libraries' own bars (tqdm's defaults; huggingface_hub's and transformers' switch)
QUIET_PROGRESS = {"TQDM_DISABLE": "1", "HF_HUB_DISABLE_PROGRESS_BARS": "1"}


def silence_progress(command: click.Command) -> None:
    """Make every ``--no-progress`` of ``command`` (and its subcommands) silence every bar, the libraries'
    included (transformers' "Loading weights", a hub download's), as it is parsed, before any of them
    loads: one mechanism, so a command added later is covered by naming its flag ``no_progress``."""
    if isinstance(command, click.Group):
        each_command(command, silence_progress)
        return
    for param in command.params:
        if param.name == "no_progress" and not getattr(param, "silences", False):
            given = param.callback

            def silenced(ctx, param, value, given=given):
                if value:
                    os.environ.update(QUIET_PROGRESS)
                return given(ctx, param, value) if given else value

            param.callback, param.silences = silenced, True  # type: ignore[attr-defined]


def guard_outputs(command: click.Command) -> None:
    """Make ``command`` (and every subcommand) refuse, before it starts, an output that any of its
    other options names as an input (``ifqa.outputs.check_output``): one guard, so a command added
    later is covered by declaring its output with ``output_option``."""
    if isinstance(command, click.Group):
        each_command(command, guard_outputs)
        return
    outputs = [param for param in command.params if getattr(param, "writes", False)]
    if not outputs or command.callback is None or getattr(command.callback, "guards_outputs", False):
        return
    shown = {
        param.name: param.opts[0] if isinstance(param, click.Option) else param.human_readable_name
        for param in command.params
    }
    written = {param.name for param in outputs}
    callback = command.callback

    @functools.wraps(callback)
    def guarded(*args, **params):
        inputs = {shown.get(name, name): value for name, value in params.items() if name not in written}
        for param in outputs:
            check_output(params.get(param.name), inputs, shown[param.name])
            check_folder_owned(params.get(param.name), param.owns, shown[param.name], param.replaces)
            say_replaced(params.get(param.name))
        return callback(*args, **params)

    guarded.guards_outputs = True  # type: ignore[attr-defined]
    command.callback = guarded


class TypedText(click.ParamType):
    """Text typed on the command line (a question): under an ASCII locale without UTF-8 mode
    (``LC_ALL=POSIX PYTHONUTF8=0``) Python hands non-ASCII bytes over as lone surrogates ('\\udcc3');
    they are the UTF-8 a terminal sends, and are decoded as such. Bytes that are not UTF-8 are one line.
    Paths keep their surrogates: the file system is read with the same encoding that made them."""

    name = "text"

    def convert(self, value, param, ctx):
        if not isinstance(value, str) or not any("\udc80" <= c <= "\udcff" for c in value):
            return value
        raw = os.fsencode(value)
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            self.fail(
                f"holds bytes that are not UTF-8 text ({raw[:40]!r}); run with a UTF-8 locale (LC_ALL=C.UTF-8) "
                "or PYTHONUTF8=1",
                param,
                ctx,
            )
