"""The `ifqa` command line: a thin layer over the stage modules.

Each command imports its stage inside the function body, so `ifqa --help` stays instant.
User mistakes raise IfqaError and are printed as one line with a non-zero exit.
"""

from __future__ import annotations

import json
import logging
import sys

import click

from ifqa import __version__
from ifqa.errors import IfqaError

log = logging.getLogger("ifqa")

SETTING_CHOICES = click.Choice(["supervised", "few-shot", "demo"])
SPLIT_CHOICES = click.Choice(["train", "dev", "test"])


def question_options(function):
    """--setting/--split/--questions/--data-dir: how every command that needs questions names them."""
    function = click.option("--data-dir", type=click.Path(file_okay=False), help="IfQA cache (default $IFQA_DATA_DIR or ~/.cache/ifqa/data).")(function)
    function = click.option("--questions", type=click.Path(dir_okay=False), help="Any file in the IfQA format (JSON list or JSONL); overrides --setting/--split.")(function)
    function = click.option("--split", type=SPLIT_CHOICES, default=None, help="Split (default dev).")(function)
    function = click.option("--setting", type=SETTING_CHOICES, default=None, help="supervised (full_split), few-shot (few_split) or the embedded demo set (default).")(function)
    return function


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="ifqa")
@click.option("-v", "--verbose", count=True, help="More logging (-vv for debug).")
@click.option("-q", "--quiet", is_flag=True, help="Warnings and errors only.")
def cli(verbose: int, quiet: bool) -> None:
    """ifqa: retrieve-then-read QA under counterfactual presuppositions (IfQA)."""
    level = logging.WARNING if quiet else (logging.DEBUG if verbose > 1 else logging.INFO)
    logging.basicConfig(level=level, format="%(asctime)s %(levelname)s %(name)s: %(message)s", datefmt="%H:%M:%S", stream=sys.stderr)


# --- data -----------------------------------------------------------------------------------


@cli.group()
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
    from ifqa import data as ifqa_data

    for path in ifqa_data.download(list(settings) or None, list(splits) or None, data_dir, base_url, force):
        click.echo(f"{path}\t{len(ifqa_data.load_examples(path))} examples")


@data.command("stats")
@question_options
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def data_stats(setting, split, questions, data_dir, as_json) -> None:
    """Counts, lengths, multi-answer share, answer types and question words of a split."""
    from ifqa import data as ifqa_data
    from ifqa.stats import format_stats, split_stats

    stats = split_stats(ifqa_data.resolve_examples(setting, split, questions, data_dir))
    click.echo(json.dumps(stats, indent=2) if as_json else format_stats(stats))


# --- evaluate --------------------------------------------------------------------------------


@cli.command()
@click.option("--predictions", type=click.Path(dir_okay=False), help="Predictions JSONL {qid, prediction, ...}.")
@click.option("--run", "run_path", type=click.Path(dir_okay=False), help="Retrieval run JSONL {qid, question, answers, ctxs}.")
@click.option("--compare", type=click.Path(dir_okay=False), help="A second predictions file: paired difference and p-value.")
@question_options
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object instead of tables.")
@click.option("--output", type=click.Path(dir_okay=False), help="Also write the report as JSON (metrics.json).")
def evaluate(predictions, run_path, compare, setting, split, questions, data_dir, as_json, output) -> None:
    """Score predictions (EM/F1, SQuAD v1.1 rules) or a retrieval run (recall@K)."""
    from ifqa import data as ifqa_data
    from ifqa import evaluation, report, runs
    from ifqa.io import write_json

    if bool(predictions) == bool(run_path):
        raise IfqaError("give exactly one of --predictions or --run")
    if predictions:
        examples = ifqa_data.resolve_examples(setting, split, questions, data_dir)
        other = runs.read_predictions(compare) if compare else None
        result = evaluation.summarize_predictions(examples, runs.read_predictions(predictions), other)
        text = report.format_prediction_report(result)
    else:
        explicit = questions or setting or split
        examples = ifqa_data.resolve_examples(setting, split, questions, data_dir) if explicit else None
        result = evaluation.summarize_run(runs.read_run(run_path), examples)
        text = report.format_run_report(result)
    if output:
        write_json(output, result)
    click.echo(json.dumps(result) if as_json else text)


# --- corpus --------------------------------------------------------------------------------


@cli.group()
def corpus() -> None:
    """Build the passage collection from Wikipedia."""


@corpus.command("build")
@click.argument("inputs", nargs=-1, required=True, type=click.Path())
@click.option("--output", "-o", required=True, type=click.Path(dir_okay=False), help="passages.jsonl, or .tsv for DPR's id/text/title layout.")
@click.option("--format", "format_", type=click.Choice(["xml", "wikiextractor-json", "wikiextractor-doc", "passages-jsonl", "passages-tsv"]), help="Input format (default: detected from the content).")
@click.option("--words", default=100, show_default=True, help="Words per passage.")
@click.option("--workers", default=1, show_default=True, help="Worker processes.")
@click.option("--batch-size", default=200, show_default=True, help="Records per batch (the unit of resuming).")
@click.option("--no-progress", is_flag=True, help="Hide the progress bar.")
def corpus_build(inputs, output, format_, words, workers, batch_size, no_progress) -> None:
    """Split Wikipedia (XML dump, WikiExtractor output or passages) into disjoint passages.

    Interrupted builds resume when the same command is run again.
    """
    from ifqa.corpus.build import build
    from ifqa.report import table

    summary = build(list(inputs), output, words, workers, format_, batch_size, progress=not no_progress)
    rows = [["records read", summary.records], ["articles kept", summary.kept]]
    rows += [[f"skipped: {reason}", count] for reason, count in sorted(summary.skipped.items())]
    rows += [["passages written", summary.passages], ["words", summary.words], ["seconds", summary.seconds]]
    click.echo(table(["corpus build", output], rows))


# --- entry point -----------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> None:
    """Console entry point: one-line errors, exit 1 for bad input, 130 when interrupted."""
    try:
        cli.main(args=argv, prog_name="ifqa", standalone_mode=False)
    except IfqaError as exc:
        click.echo(f"ifqa: error: {exc}", err=True)
        sys.exit(1)
    except (click.exceptions.Abort, KeyboardInterrupt):  # click turns Ctrl-C into Abort
        click.echo("ifqa: interrupted; rerun the same command to resume", err=True)
        sys.exit(130)
    except click.ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code)


if __name__ == "__main__":
    main()
