"""`ifqa data download|stats`."""

from __future__ import annotations

import json

import click

from ifqa.cli.options import SPLIT_CHOICES, question_options, question_source


@click.group()
def data() -> None:
    """Download and inspect the IfQA splits."""


@data.command("download")
@click.option("--setting", "settings", type=click.Choice(["supervised", "few-shot"]), multiple=True, help="Setting(s) to fetch (default both).")
@click.option("--split", "splits", type=SPLIT_CHOICES, multiple=True, help="Split(s) to fetch (default all).")
@click.option("--data-dir", type=click.Path(file_okay=False), help="Cache folder (default $IFQA_DATA_DIR or ~/.cache/ifqa/data).")
@click.option("--base-url", help="Where the release's dataset/ folder is served (default the authors' GitHub; or $IFQA_BASE_URL).")
@click.option("--force", is_flag=True, help="Download again even when cached.")
def data_download(settings, splits, data_dir, base_url, force) -> None:
    """Fetch the official IfQA JSON files (supervised = full_split, few-shot = few_split)."""
    from ifqa.datasets import ifqa

    for path in ifqa.download(list(settings) or None, list(splits) or None, data_dir, base_url, force):
        click.echo(f"{path}\t{len(ifqa.load_examples(path))} examples")


@data.command("stats")
@question_options
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def data_stats(setting, split, questions, data_dir, as_json) -> None:
    """Counts, lengths, multi-answer share, answer types and question words of a split."""
    from ifqa.datasets.stats import format_stats, split_stats

    stats = split_stats(question_source(setting, split, questions, data_dir).load().examples)
    click.echo(json.dumps(stats, indent=2) if as_json else format_stats(stats))


COMMANDS = [data]
