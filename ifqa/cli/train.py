"""`ifqa train NAME`, one command per trainable kind (``registry.TRAINABLE``: fid, llm, reranker, retriever,
control; also spelled `--reader fid`, `--reranker`, `--retriever`, `--control`)."""

from __future__ import annotations

import logging
from pathlib import Path

import click

from ifqa.cards import CARD, FID_CONFIG
from ifqa.cli.options import count_option, output_option, question_options_for, question_source
from ifqa.configs import click_options, from_options
from ifqa.distributed import launched
from ifqa.errors import IfqaError
from ifqa.llm.gguf_forms import ADAPTER
from ifqa.registry import TRAINABLE
from ifqa.training.kinds import TrainJob
from ifqa.training.loop import RESULT, RUN_CONFIG, STATE, Invocation

#: what marks a saved model folder (best/, last/, model/) as a training run's: what its save writes (the
#: weights' config first; a kill may come before the card), never a file of the user's
SAVED_READER = (CARD, FID_CONFIG, "config.json", ADAPTER, "trainer_state.pt")
SAVED_MODEL = (CARD, "config.json")
log = logging.getLogger(__name__)
ALIASES = {"--reranker": "reranker", "--retriever": "retriever", "--control": "control"}


class TrainGroup(click.Group):
    """One command per ``registry.TRAINABLE`` kind. ``--reader fid``, ``--reranker``, ``--retriever`` and
    ``--control`` anywhere name the subcommand; options with none of them train FiD, as the first
    version's ``ifqa train`` did."""

    def list_commands(self, ctx) -> list[str]:
        return list(TRAINABLE)

    def get_command(self, ctx, name: str):
        """The command of a registered kind, made when first asked for (a kind registered at run time too)."""
        if name not in TRAINABLE:
            return None
        if name not in self.commands:
            kind = TRAINABLE.get(name)
            (_run_command if kind.inputs == "run" else _questions_command)(name, kind)
        return self.commands[name]

    def parse_args(self, ctx, args):
        args = list(args)
        for i, arg in enumerate(args):
            if arg == "--reader" and i + 1 < len(args):
                return super().parse_args(ctx, [args[i + 1], *args[:i], *args[i + 2 :]])
            if arg.startswith("--reader="):
                return super().parse_args(ctx, [arg.split("=", 1)[1], *args[:i], *args[i + 1 :]])
            if arg in ALIASES:
                return super().parse_args(ctx, [ALIASES[arg], *args[:i], *args[i + 1 :]])
        if args and args[0].startswith("-") and args[0] not in ("-h", "--help"):
            args = ["fid", *args]  # the first version's `ifqa train --run ...` trained FiD
        return super().parse_args(ctx, args)


@click.group(cls=TrainGroup)
def train() -> None:
    """Train a reader (fid, llm), a reranker, a dense retriever, or the question-agnostic control."""


def _run_command(name: str, kind) -> None:
    """``ifqa train NAME`` for a kind trained on a run file (FiD, the LLM reader)."""

    @train.command(name, help=kind.help)
    @click.option(
        "--run",
        "run_path",
        required=True,
        type=click.Path(dir_okay=False),
        help="Training run: ifqa retrieve over the training questions (questions, answers, passages).",
    )
    @click.option(
        "--dev-run", type=click.Path(dir_okay=False), help="Dev run: EM every --eval-every steps, best/ kept."
    )
    @output_option(
        "Training folder (best/, last/, train_log.jsonl).",
        folder=True,
        owns=(RUN_CONFIG, STATE, RESULT, "last/trainer_state.pt"),
        replaces={"best": SAVED_READER, "last": SAVED_READER},
    )
    @click_options(kind.recipe)
    @count_option("--stop-after", "Stop after N steps (state saved; rerun to continue).")
    @click.option("--device", help="cpu, cuda ... (default: GPU when present).")
    @click.option("--no-progress", is_flag=True, help="Hide progress bars.")
    @click.option("--no-bf16", "no_bf16", is_flag=True, hidden=True, help="The former spelling of --precision fp32.")
    def command(run_path, dev_run, output, stop_after, device, no_progress, no_bf16, **options) -> None:
        if no_bf16:  # the former spelling (train fid's) of --precision fp32, every train command's option
            if options.get("precision") not in (None, "fp32"):
                raise IfqaError(f"--no-bf16 (now --precision fp32) contradicts --precision {options['precision']}")
            log.warning("--no-bf16 is now --precision fp32 (the old name works for this release)")
            options["precision"] = "fp32"
        recipe = from_options(kind.recipe, options)  # checked before torch loads
        job = TrainJob(name, Path(output), Invocation(device, not no_progress, stop_after), run_path, dev_run)
        record = kind.train(recipe, job)
        if launched().main:  # under a launcher, rank 0 alone reports
            click.echo(kind.summary(output, record))


def _questions_command(name: str, kind) -> None:
    """``ifqa train NAME`` for a kind trained on questions with mined negatives: options from the recipe
    dataclass plus the shared ones, one training job."""

    @train.command(name, help=kind.help)
    @click_options(kind.recipe)
    @question_options_for("supervised", "train")
    @output_option(
        "Training folder (model/ with its card ifqa_card.json).",
        folder=True,
        owns=(f"model/{CARD}", "groups.json", "groups.jsonl", STATE, RESULT),
        replaces={"model": SAVED_MODEL},
    )
    @click.option("--corpus", type=click.Path(dir_okay=False), help="The collection file, if it moved since indexing.")
    @click.option(
        "--dev-run",
        type=click.Path(dir_okay=False),
        help="A first-stage run of dev questions: its recall before and after goes into the model card.",
    )
    @click.option("--device", help="cpu, cuda ... (default: GPU when present).")
    @count_option("--stop-after", "Stop after N steps (state saved; rerun to resume).")
    @click.option("--no-progress", is_flag=True, help="Hide progress bars.")
    def command(
        setting, split, questions, data_dir, output, corpus, dev_run, device, stop_after, no_progress, **options
    ) -> None:
        recipe = from_options(kind.recipe, options)
        source = question_source(setting or "supervised", split or "train", questions, data_dir)
        run = Invocation(device, not no_progress, stop_after)
        card = kind.train(recipe, TrainJob(name, Path(output), run, dev_run=dev_run, source=source, corpus=corpus))
        if "rank" not in card:  # under a launcher, rank 0 alone reports
            done = (
                "already trained by this command (same recipe and data): nothing to do; " if card.get("already") else ""
            )
            click.echo(done + kind.summary(output, card))


COMMANDS = [train]
