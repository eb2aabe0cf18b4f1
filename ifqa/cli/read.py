"""`ifqa read llm|fid|...`: one subcommand per registered reader, its options made from the reader's
configuration dataclass (``ifqa.configs``), made when it is named (so `ifqa read llm` imports the LLM
reader and no other); `ifqa read --reader NAME ...` is kept as an alias."""

from __future__ import annotations

from pathlib import Path

import click

from ifqa.choices import LazyGroup
from ifqa.cli.options import output_option, question_options, question_source
from ifqa.configs import click_options, from_options
from ifqa.llm.config import ModelAccess
from ifqa.readers import ReadJob
from ifqa.registry import READERS


class ReadGroup(LazyGroup):
    """Accepts the first version's ``--reader NAME`` anywhere before the options, as ``read NAME``."""

    def parse_args(self, ctx, args):
        args = list(args)
        for i, arg in enumerate(args):
            if arg == "--reader" and i + 1 < len(args):
                args = [args[i + 1], *args[:i], *args[i + 2 :]]
                break
            if arg.startswith("--reader="):
                args = [arg.split("=", 1)[1], *args[:i], *args[i + 1 :]]
                break
        return super().parse_args(ctx, args)


@click.group(cls=ReadGroup, names=READERS.names, load=lambda name: [_make_command(name)])
def read() -> None:
    """Answer questions with a reader; writes predictions JSONL (+ manifest)."""


def _make_command(name: str) -> click.Command:
    entry = READERS.get(name)

    run_option = click.option(
        "--run", "run_path", type=click.Path(dir_okay=False), help="Run file with retrieved passages (open-book, FiD)."
    )

    @click.command(name, help=(entry.__doc__ or f"The {name} reader.").strip().splitlines()[0])
    @click_options(entry.config)
    @(run_option if entry.reads_run else lambda function: function)  # iterative: none
    @click.option(
        "--api-key",
        help="API key (default $OPENAI_API_KEY). Never logged or stored.",
        hidden=not issubclass(entry.config, ModelAccess),
    )
    @question_options
    @output_option("Predictions JSONL (default runs/<questions>-<reader>-<mode>-<model>.jsonl).", required=False)
    @click.option("--no-progress", is_flag=True, help="Hide the progress bar.")
    def command(api_key, setting, split, questions, data_dir, output, no_progress, **options) -> None:
        run_path = options.pop("run_path", None)
        config = entry.settled(from_options(entry.config, options))
        source = question_source(setting, split, questions, data_dir)
        question_set = source.load()
        output = Path(output) if output else Path("runs") / config.output_name(source.label)
        counters = entry.read(
            config,
            ReadJob(question_set, source, output, Path(run_path) if run_path else None, not no_progress, api_key),
        )
        click.echo(f"predictions: {output}")
        if counters:
            click.echo(
                f"requests: {counters['requests']}  cache hits: {counters['cache_hits']}  "
                f"prompt tokens: {counters['prompt_tokens']}  completion tokens: {counters['completion_tokens']}  "
                f"retries: {counters.get('retries', 0)}"
                + (
                    f"  reasoning tokens: {counters['reasoning_tokens']}  cut off while thinking: {counters['truncated']}"
                    if "truncated" in counters
                    else ""
                )
            )

    return command


COMMANDS = [read]
