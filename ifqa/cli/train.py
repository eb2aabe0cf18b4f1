"""`ifqa train --reader fid`."""

from __future__ import annotations

import click


@click.command()
@click.option("--reader", type=click.Choice(["fid"]), default="fid", show_default=True)
@click.option("--run", "run_path", required=True, type=click.Path(dir_okay=False), help="Training run (questions, answers, retrieved passages).")
@click.option("--dev-run", type=click.Path(dir_okay=False), help="Dev run: EM every --eval-every steps, best checkpoint kept.")
@click.option("--model", default="t5-base", show_default=True, help="T5 hub id or local folder (t5-base, google/flan-t5-large, ...).")
@click.option("--output", "-o", required=True, type=click.Path(file_okay=False), help="Training folder (best/, last/, train_log.jsonl).")
@click.option("--steps", type=click.IntRange(min=1), default=15000, show_default=True)
@click.option("--lr", default=1e-4, show_default=True)
@click.option("--batch-size", type=click.IntRange(min=1), default=1, show_default=True)
@click.option("--accumulation", type=click.IntRange(min=1), default=1, show_default=True, help="Gradient accumulation steps.")
@click.option("--warmup-steps", type=click.IntRange(min=0), default=1000, show_default=True)
@click.option("--weight-decay", default=0.01, show_default=True)
@click.option("--eval-every", type=click.IntRange(min=1), default=500, show_default=True)
@click.option("--save-every", type=click.IntRange(min=1), help="Also save the resumable state every N steps.")
@click.option("--stop-after", type=click.IntRange(min=1), help="Stop this invocation after N steps (state saved; rerun to continue).")
@click.option("--n-context", type=click.IntRange(min=1), default=20, show_default=True)
@click.option("--text-maxlength", type=click.IntRange(min=1), default=250, show_default=True)
@click.option("--answer-maxlength", type=click.IntRange(min=1), default=20, show_default=True)
@click.option("--gradient-checkpointing", is_flag=True)
@click.option("--no-bf16", is_flag=True, help="Train in fp32 on GPU.")
@click.option("--seed", default=0, show_default=True, help="Seed for initialization and data order.")
@click.option("--device", help="cpu, cuda ... (default: GPU when present).")
@click.option("--no-progress", is_flag=True, help="Hide the progress bar.")
def train(reader, run_path, dev_run, model, output, steps, lr, batch_size, accumulation, warmup_steps, weight_decay,
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


COMMANDS = [train]
