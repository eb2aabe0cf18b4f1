"""`ifqa serve`: the page and JSON API over one retrieval pipeline and, optionally, an LLM reader."""

from __future__ import annotations

import logging

import click

from ifqa.cli.options import RegistryChoice, backend_label, backend_options, question_options, question_source
from ifqa.configs import click_options, from_options
from ifqa.readers.llm.config import LLMReaderConfig
from ifqa.registry import QUERY_MODES

log = logging.getLogger(__name__)

#: What differs from `ifqa read llm`: a page shows retrieved passages, so the reader reads them.
READER_DEFAULTS = {"mode": "open"}


@click.command()
@click.option(
    "--index",
    "indexes",
    multiple=True,
    help="Index folder (repeat for hybrid), demo:bm25|dense or prebuilt:NAME. Default: the demo collection.",
)
@click.option(
    "--query-mode",
    type=RegistryChoice(QUERY_MODES),
    default="question",
    show_default=True,
    help="What is searched (as in `ifqa retrieve`).",
)
@click.option(
    "--rewrite-model", help="LLM for --query-mode rewrite|hyde (reached like --model, through --rewrite-base-url)."
)
@click.option("--rewrite-base-url", help="OpenAI-compatible endpoint for --rewrite-model.")
@click.option(
    "--rerank", "rerank_model", help="Cross-encoder (folder or hub id) reranking the first stage's top passages."
)
@click.option(
    "--rerank-depth",
    default=100,
    show_default=True,
    type=click.IntRange(min=1),
    help="First-stage passages the reranker re-scores.",
)
@backend_options("Reranking", prefix="rerank-")
@click.option("--corpus", type=click.Path(dir_okay=False), help="The collection file, if it moved since indexing.")
@click_options(LLMReaderConfig, READER_DEFAULTS)
@click.option("--api-key", help="API key for the reader's endpoint (default $OPENAI_API_KEY). Never logged or stored.")
@question_options
@click.option(
    "--host",
    default="127.0.0.1",
    show_default=True,
    help="Address to bind (0.0.0.0 exposes the server to the network).",
)
@click.option("--port", default=8000, show_default=True, type=click.IntRange(0, 65535), help="Port to listen on.")
@click.option(
    "--max-k", default=100, show_default=True, type=click.IntRange(min=1), help="Most passages one request may ask for."
)
def serve(
    indexes,
    query_mode,
    rewrite_model,
    rewrite_base_url,
    rerank_model,
    rerank_depth,
    rerank_backend,
    rerank_quantize,
    corpus,
    api_key,
    setting,
    split,
    questions,
    data_dir,
    host,
    port,
    max_k,
    **reader_options,
) -> None:
    """Serve a page to ask one question and see every stage, and the JSON API (/search, /answer, /health).

    Questions of the named split (default: the demo dev set) get their gold and answer flags.
    Without --model the server retrieves only, and says how to add a reader.
    """
    import uvicorn

    from ifqa.retrieval.pipeline import DEMO_INDEX, RetrievalConfig
    from ifqa.serve.app import create_app
    from ifqa.serve.service import Limits, QAService

    reader = from_options(
        LLMReaderConfig, {k: READER_DEFAULTS.get(k) if v is None else v for k, v in reader_options.items()}
    )
    retrieval = RetrievalConfig(
        indexes=list(indexes) or [DEMO_INDEX],
        k=10,
        query_mode=query_mode,
        corpus=corpus,
        device=reader.device,
        rerank=rerank_model,
        rerank_depth=rerank_depth,
        rerank_backend=backend_label(rerank_backend, rerank_quantize),
        rewrite_model=rewrite_model,
        rewrite_base_url=rewrite_base_url,
    )
    service = QAService(
        retrieval, reader, [question_source(setting, split, questions, data_dir)], api_key, Limits(max_k=max_k)
    )
    log.info(
        "ifqa serve on http://%s:%d (%s%s%s)",
        host,
        port,
        " + ".join(r.name for r in service.pipeline.retrievers),
        f", reranker {rerank_model}" if rerank_model else "",
        f", reader {reader.model}" if reader.model else ", no reader",
    )
    uvicorn.run(create_app(service), host=host, port=port, log_level="warning")


COMMANDS = [serve]
