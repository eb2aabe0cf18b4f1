"""`ifqa experiment run CONFIG.yaml`."""

from __future__ import annotations

import click

from ifqa.experiments import load_config, output_dir, run_experiment


@click.group()
def experiment() -> None:
    """Run experiment grids from YAML configs (experiments/*.yaml)."""


@experiment.command("run")
@click.argument("config", type=click.Path(dir_okay=False))
@click.option("--force", is_flag=True, help="Rerun every stage, up to date or not.")
@click.option("--no-progress", is_flag=True, help="Hide the progress bar.")
def experiment_run(config, force, no_progress) -> None:
    """Retrieve -> read -> evaluate; stages whose outputs are up to date are skipped."""
    loaded = load_config(config)  # once: validated whole before any stage runs
    run_experiment(loaded, force, progress=not no_progress)
    output = output_dir(loaded)
    click.echo((output / "results.md").read_text())
    click.echo(f"written: {output / 'results.md'}, results.csv, results.json")


COMMANDS = [experiment]
