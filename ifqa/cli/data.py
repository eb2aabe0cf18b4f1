"""`ifqa data download|stats`."""

from __future__ import annotations

import json

import click

from ifqa.cli.options import SPLIT_CHOICES, question_options, question_source
from ifqa.datasets import causalqa, ifqa, wiqa
from ifqa.datasets.stats import format_stats, split_stats
from ifqa.errors import IfqaError


@click.group()
def data() -> None:
    """Download and inspect question sets (IfQA, WIQA, CausalQA)."""


@data.command("download")
@click.option(
    "--setting",
    "settings",
    type=click.Choice(["supervised", "few-shot", "wiqa", "causalqa"]),
    multiple=True,
    help="What to fetch (default IfQA's supervised and few-shot): wiqa is AllenAI's WIQA v2 release, "
    "causalqa the Webis-CausalQA-22 CSVs.",
)
@click.option("--split", "splits", type=SPLIT_CHOICES, multiple=True, help="IfQA split(s) to fetch (default all).")
@click.option(
    "--data-dir", type=click.Path(file_okay=False), help="Cache folder (default $IFQA_DATA_DIR or ~/.cache/ifqa/data)."
)
@click.option(
    "--base-url", help="Where IfQA's dataset/ folder is served (default the authors' GitHub; or $IFQA_BASE_URL)."
)
@click.option(
    "--url",
    help="The WIQA or CausalQA release archive (default the official one; or $IFQA_WIQA_URL / $IFQA_CAUSALQA_URL).",
)
@click.option("--force", is_flag=True, help="Download again even when cached.")
@click.option("--no-progress", is_flag=True, help="Hide the progress bar.")
def data_download(settings, splits, data_dir, base_url, url, force, no_progress) -> None:
    """Fetch official releases into the cache, validating every file before it is kept."""
    settings = list(settings) or ["supervised", "few-shot"]
    ifqa_settings = [s for s in settings if s in ifqa.SETTINGS]
    if splits and not ifqa_settings:
        raise IfqaError("--split picks IfQA splits; WIQA and CausalQA come as one archive each")
    if url and len(set(settings) & {"wiqa", "causalqa"}) != 1:
        raise IfqaError("--url names one archive: use it with exactly one of --setting wiqa or --setting causalqa")
    if ifqa_settings:
        for path in ifqa.download(ifqa_settings, list(splits) or None, data_dir, base_url, force):
            click.echo(f"{path}\t{len(ifqa.load_examples(path))} examples")
    for name, module in (("wiqa", wiqa), ("causalqa", causalqa)):
        if name in settings:
            for path in module.download(data_dir, url, force, progress=not no_progress):
                click.echo(f"{path}")


@data.command("stats")
@question_options
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def data_stats(setting, split, questions, data_dir, as_json) -> None:
    """Counts, lengths, multi-answer share, answer types and question words of a split."""
    stats = split_stats(question_source(setting, split, questions, data_dir).load().examples)
    click.echo(json.dumps(stats, indent=2) if as_json else format_stats(stats))


COMMANDS = [data]
