"""Options shared by several commands: which questions, and choices read from the registries."""

from __future__ import annotations

import click

from ifqa.datasets import QuestionSource
from ifqa.registry import DATASETS, Registry

SPLIT_CHOICES = click.Choice(["train", "dev", "test"])


class RegistryChoice(click.Choice):
    """A choice among a registry's names, read when the option is parsed (so added entries count)."""

    def __init__(self, registry: Registry):
        self.registry = registry
        super().__init__(registry.names())

    @property
    def choices(self):  # type: ignore[override]
        return tuple(self.registry.names())

    @choices.setter
    def choices(self, value) -> None:
        pass


def question_options_for(setting: str = "demo", split: str = "dev"):
    """--setting/--split/--questions/--data-dir: how every command that needs questions names them;
    the help states the command's own defaults (training commands: supervised train)."""

    def decorate(function):
        function = click.option("--data-dir", type=click.Path(file_okay=False), help="IfQA cache (default $IFQA_DATA_DIR or ~/.cache/ifqa/data).")(function)
        function = click.option("--questions", type=click.Path(dir_okay=False), help="Any file in the IfQA format (JSON list or JSONL); overrides --setting/--split.")(function)
        function = click.option("--split", type=SPLIT_CHOICES, default=None, help=f"Split (default {split}).")(function)
        return click.option("--setting", type=RegistryChoice(DATASETS), default=None,
                            help="IfQA supervised (full_split), few-shot (few_split), the embedded demo set; wiqa, "
                            f"causalqa[-random] and their -demo sets (default {setting}). With --questions: the "
                            "file's format.")(function)

    return decorate


question_options = question_options_for()


def question_source(setting, split, questions, data_dir) -> QuestionSource:
    return QuestionSource(setting, split, questions, data_dir)


def backend_options(what: str, prefix: str = ""):
    """``--backend torch|onnx|openvino`` and ``--quantize int8`` (``prefix``: ``rerank-`` on retrieve and serve)."""

    def decorate(function):
        function = click.option(f"--{prefix}quantize", f"{prefix.replace('-', '_')}quantize", type=click.Choice(["int8"]),
                                help=f"{what} with int8 weights (needs --{prefix}backend onnx or openvino; checked "
                                "against the fp32 model on a probe batch).")(function)
        return click.option(f"--{prefix}backend", f"{prefix.replace('-', '_')}backend",
                            type=click.Choice(["torch", "onnx", "openvino"]), default="torch", show_default=True,
                            help=f"{what} on PyTorch (any device), or exported once to ONNX Runtime or OpenVINO for "
                            "the CPU (cached; pip install 'ifqa[onnx]' or 'ifqa[openvino]').")(function)

    return decorate


def backend_label(backend: str, quantize: str | None) -> str:
    """What ``exported.Backend.parse`` reads, checked here so a bad pair is one line before any work."""
    from ifqa.retrieval.exported import Backend

    return Backend(backend, quantize).label
