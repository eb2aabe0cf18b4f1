"""`ifqa train fid|reranker|retriever|control` (also spelled `--reader fid`, `--reranker`, `--retriever`, `--control`)."""

from __future__ import annotations

from pathlib import Path

import click

from ifqa.cli.options import output_option, question_options_for, question_source
from ifqa.configs import click_options, from_options
from ifqa.distributed import launched
from ifqa.readers.fid import FiDTrainConfig
from ifqa.training.jobs import train_job
from ifqa.training.loop import Invocation
from ifqa.training.recipes import ControlRecipe, RerankerRecipe, RetrieverRecipe

ALIASES = {"--reranker": "reranker", "--retriever": "retriever", "--control": "control"}


class TrainGroup(click.Group):
    """``--reader fid``, ``--reranker``, ``--retriever`` and ``--control`` anywhere name the subcommand;
    options with none of them train FiD, as the first version's ``ifqa train`` did."""

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
    """Train a reader (fid), a reranker, a dense retriever, or the question-agnostic control."""


@train.command("fid")
@click.option(
    "--run",
    "run_path",
    required=True,
    type=click.Path(dir_okay=False),
    help="Training run (questions, answers, retrieved passages).",
)
@click.option(
    "--dev-run", type=click.Path(dir_okay=False), help="Dev run: EM every --eval-every steps, best checkpoint kept."
)
@output_option("Training folder (best/, last/, train_log.jsonl).", folder=True)
@click_options(FiDTrainConfig)
@click.option(
    "--stop-after",
    type=click.IntRange(min=1),
    help="Stop this invocation after N steps (state saved; rerun to continue).",
)
@click.option("--device", help="cpu, cuda ... (default: GPU when present).")
@click.option("--no-progress", is_flag=True, help="Hide the progress bar.")
def train_fid(run_path, dev_run, output, stop_after, device, no_progress, **options) -> None:
    """Train a Fusion-in-Decoder reader on a run file; rerun the same command to resume."""
    config = from_options(FiDTrainConfig, options)  # checked before torch loads
    from ifqa.training import fid  # torch and transformers, once the options are checked

    state = fid.train(run_path, dev_run, output, config, device, progress=not no_progress, stop_after=stop_after)

    if not launched().main:  # under a launcher, rank 0 alone reports
        return
    last = state["log"][-1] if state["log"] else {}
    click.echo(f"{output}: step {state['step']}, last loss {last.get('loss')}, best dev EM {state['best_em']:.2f}")


def _learning_command(kind: str, recipe_class: type, help: str, summary) -> None:
    """``ifqa train KIND``: options from the recipe dataclass plus the shared ones, one training job."""

    @train.command(kind, help=help)
    @click_options(recipe_class)
    @question_options_for("supervised", "train")
    @output_option("Training folder (model/ with its card ifqa_card.json).", folder=True)
    @click.option("--corpus", type=click.Path(dir_okay=False), help="The collection file, if it moved since indexing.")
    @click.option(
        "--dev-run",
        type=click.Path(dir_okay=False),
        help="A first-stage run of dev questions: its recall before and after goes into the model card.",
    )
    @click.option("--device", help="cpu, cuda ... (default: GPU when present).")
    @click.option("--stop-after", type=click.IntRange(min=1), help="Stop after N steps (state saved; rerun to resume).")
    @click.option("--no-progress", is_flag=True, help="Hide progress bars.")
    def command(
        setting, split, questions, data_dir, output, corpus, dev_run, device, stop_after, no_progress, **options
    ) -> None:
        recipe = from_options(recipe_class, options)
        source = question_source(setting or "supervised", split or "train", questions, data_dir)
        card = train_job(
            kind, recipe, source, Path(output), corpus, dev_run, Invocation(device, not no_progress, stop_after)
        )
        if "rank" not in card:  # under a launcher, rank 0 alone reports
            done = (
                "already trained by this command (same recipe and data): nothing to do; " if card.get("already") else ""
            )
            click.echo(done + summary(output, card))


def _card_line(output, card: dict) -> str:
    if not card.get("finished"):
        return f"{output}: stopped at step {card['step']} of {card['steps']}; rerun the same command to continue"
    dev = card.get("dev") or {}
    scores = "  ".join(
        f"{name} R@1 {v['gold_recall']['1']:.1f} R@5 {v['gold_recall']['5']:.1f}" for name, v in dev.items()
    )
    return f"{output}/model: trained in {card['train_seconds']:.0f} s" + (f"; dev {scores}" if scores else "")


_learning_command(
    "reranker",
    RerankerRecipe,
    "Train a cross-encoder reranker on IfQA training questions with mined hard negatives.",
    _card_line,
)
_learning_command(
    "retriever",
    RetrieverRecipe,
    "Fine-tune a bi-encoder (all of it, or its question side only) on IfQA training questions.",
    _card_line,
)
_learning_command(
    "control",
    ControlRecipe,
    "Fit the question-agnostic control (a passage classifier that never sees the question).",
    lambda output, card: f"{output}/model: passage classifier, held-out AUC {card['classifier']['held_out_auc']:.3f}",
)

COMMANDS = [train]
