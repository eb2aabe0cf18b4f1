"""`ifqa train fid|reranker|retriever|control` (also spelled `--reader fid`, `--reranker`, `--retriever`, `--control`)."""

from __future__ import annotations

from pathlib import Path

import click

from ifqa.cli.options import question_options, question_source
from ifqa.configs import click_options, from_options
from ifqa.training.recipes import ControlRecipe, RerankerRecipe, RetrieverRecipe

ALIASES = {"--reranker": "reranker", "--retriever": "retriever", "--control": "control"}


class TrainGroup(click.Group):
    """``--reader fid``, ``--reranker``, ``--retriever`` and ``--control`` anywhere name the subcommand;
    options with none of them train FiD, as the first version's ``ifqa train`` did."""

    def parse_args(self, ctx, args):
        args = list(args)
        for i, arg in enumerate(args):
            if arg == "--reader" and i + 1 < len(args):
                return super().parse_args(ctx, [args[i + 1], *args[:i], *args[i + 2:]])
            if arg.startswith("--reader="):
                return super().parse_args(ctx, [arg.split("=", 1)[1], *args[:i], *args[i + 1:]])
            if arg in ALIASES:
                return super().parse_args(ctx, [ALIASES[arg], *args[:i], *args[i + 1:]])
        if args and args[0].startswith("-") and args[0] not in ("-h", "--help"):
            args = ["fid", *args]  # the first version's `ifqa train --run ...` trained FiD
        return super().parse_args(ctx, args)


@click.group(cls=TrainGroup)
def train() -> None:
    """Train a reader (fid), a reranker, a dense retriever, or the question-agnostic control."""


@train.command("fid")
@click.option("--run", "run_path", required=True, type=click.Path(dir_okay=False), help="Training run (questions, answers, retrieved passages).")
@click.option("--dev-run", type=click.Path(dir_okay=False), help="Dev run: EM every --eval-every steps, best checkpoint kept.")
@click.option("--model", default="t5-base", show_default=True, help="T5 hub id or local folder (t5-base, google/flan-t5-large, ...).")
@click.option("--output", "-o", required=True, type=click.Path(file_okay=False), help="Training folder (best/, last/, train_log.jsonl).")
@click.option("--steps", type=click.IntRange(min=1), default=15000, show_default=True, help="Optimizer steps in all (the paper trains 15k).")
@click.option("--lr", default=1e-4, show_default=True, help="Peak learning rate (AdamW, linear warm-up and decay).")
@click.option("--batch-size", type=click.IntRange(min=1), default=1, show_default=True, help="Questions per step (each with --n-context passages).")
@click.option("--accumulation", type=click.IntRange(min=1), default=1, show_default=True, help="Gradient accumulation steps.")
@click.option("--warmup-steps", type=click.IntRange(min=0), default=1000, show_default=True, help="Steps of linear warm-up.")
@click.option("--weight-decay", default=0.01, show_default=True, help="AdamW weight decay.")
@click.option("--eval-every", type=click.IntRange(min=1), default=500, show_default=True, help="Dev EM every N steps (with --dev-run).")
@click.option("--save-every", type=click.IntRange(min=1), help="Also save the resumable state every N steps.")
@click.option("--stop-after", type=click.IntRange(min=1), help="Stop this invocation after N steps (state saved; rerun to continue).")
@click.option("--n-context", type=click.IntRange(min=1), default=20, show_default=True, help="Passages per question fed to the encoder.")
@click.option("--text-maxlength", type=click.IntRange(min=1), default=250, show_default=True, help="Tokens per question+passage input.")
@click.option("--answer-maxlength", type=click.IntRange(min=1), default=20, show_default=True, help="Tokens per target answer.")
@click.option("--gradient-checkpointing", is_flag=True, help="Recompute activations to save GPU memory.")
@click.option("--no-bf16", is_flag=True, help="Train in fp32 on GPU.")
@click.option("--seed", default=0, show_default=True, help="Seed for initialization and data order.")
@click.option("--device", help="cpu, cuda ... (default: GPU when present).")
@click.option("--no-progress", is_flag=True, help="Hide the progress bar.")
def train_fid(run_path, dev_run, model, output, steps, lr, batch_size, accumulation, warmup_steps, weight_decay,
          eval_every, save_every, stop_after, n_context, text_maxlength, answer_maxlength, gradient_checkpointing, no_bf16, seed,
          device, no_progress) -> None:
    """Train a Fusion-in-Decoder reader on a run file; rerun the same command to resume."""
    from ifqa.readers.fid import train as fid

    config = fid.TrainConfig(model=model, steps=steps, lr=lr, batch_size=batch_size, accumulation=accumulation,
                             warmup_steps=warmup_steps, weight_decay=weight_decay, eval_every=eval_every,
                             save_every=save_every, seed=seed, gradient_checkpointing=gradient_checkpointing,
                             bf16=not no_bf16, n_context=n_context, text_maxlength=text_maxlength,
                             answer_maxlength=answer_maxlength)
    state = fid.train(run_path, dev_run, output, config, device, progress=not no_progress, stop_after=stop_after)
    last = state["log"][-1] if state["log"] else {}
    click.echo(f"{output}: step {state['step']}, last loss {last.get('loss')}, best dev EM {state['best_em']:.2f}")


def _learning_options(function):
    """What every learned retrieval component needs: training questions, the collection, output."""
    function = click.option("--no-progress", is_flag=True, help="Hide progress bars.")(function)
    function = click.option("--stop-after", type=click.IntRange(min=1), help="Stop after N steps (state saved; rerun to resume).")(function)
    function = click.option("--device", help="cpu, cuda ... (default: GPU when present).")(function)
    function = click.option("--dev-run", type=click.Path(dir_okay=False), help="A first-stage run of dev questions: its recall before and after goes into the model card.")(function)
    function = click.option("--corpus", type=click.Path(dir_okay=False), help="The collection file, if it moved since indexing.")(function)
    function = click.option("--output", "-o", required=True, type=click.Path(file_okay=False), help="Training folder (model/, model_card.json).")(function)
    return question_options(function)


def _learning_command(kind: str, recipe_class: type, help: str, summary) -> None:
    """``ifqa train KIND``: options from the recipe dataclass plus the shared ones, one training job."""

    @train.command(kind, help=help)
    @click_options(recipe_class)
    @_learning_options
    def command(setting, split, questions, data_dir, output, corpus, dev_run, device, stop_after, no_progress, **options) -> None:
        from ifqa.training.jobs import train_job

        recipe = from_options(recipe_class, options)
        source = question_source(setting or "supervised", split or "train", questions, data_dir)
        card = train_job(kind, recipe, source, Path(output), corpus, dev_run, device, not no_progress, stop_after)
        click.echo(summary(output, card))


def _card_line(output, card: dict) -> str:
    if not card.get("finished"):
        return f"{output}: stopped at step {card['step']} of {card['steps']}; rerun the same command to continue"
    dev = card.get("dev") or {}
    scores = "  ".join(f"{name} R@1 {v['gold_recall']['1']:.1f} R@5 {v['gold_recall']['5']:.1f}" for name, v in dev.items())
    return f"{output}/model: trained in {card['train_seconds']:.0f} s" + (f"; dev {scores}" if scores else "")


_learning_command("reranker", RerankerRecipe, "Train a cross-encoder reranker on IfQA training questions with mined "
                  "hard negatives.", _card_line)
_learning_command("retriever", RetrieverRecipe, "Fine-tune a bi-encoder (all of it, or its question side only) on IfQA "
                  "training questions.", _card_line)
_learning_command("control", ControlRecipe, "Fit the question-agnostic control (a passage classifier that never sees "
                  "the question).", lambda output, card: f"{output}/model: passage classifier, held-out AUC "
                  f"{card['classifier']['held_out_auc']:.3f}")

COMMANDS = [train]
