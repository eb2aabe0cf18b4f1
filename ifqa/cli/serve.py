"""`ifqa serve`: the page and JSON API over one retrieval pipeline and, optionally, an LLM reader."""

from __future__ import annotations

import logging

import click

from ifqa.cli.options import (
    RUNS_UNTIL_STOPPED,
    count_option,
    question_options,
    question_source,
    retrieval_config,
    retrieval_options,
)
from ifqa.configs import click_options, from_options, option_fields
from ifqa.readers.llm.config import LLMReaderConfig, SharedDeviceReaderConfig
from ifqa.serve.service import Limits, QAService

log = logging.getLogger(__name__)

#: What differs from `ifqa read llm`: a page shows retrieved passages, so the reader reads them.
READER_DEFAULTS = {"mode": "open"}
READER_FIELDS = {f.name for f in option_fields(LLMReaderConfig)}


#: Retrieval settings ``ifqa serve`` sets another way: ``k`` per request (``?k=``, at most
#: ``--max-k``), the device is the reader's ``--device``, and one question is searched at a time.
SERVED_OTHERWISE = {"k": "per request", "device": "--device", "batch_size": "one question per request"}


@click.command()
@retrieval_options(exclude=tuple(SERVED_OTHERWISE))
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
@count_option("--max-k", "Most passages one request may ask for.", default=100)
def serve(api_key, setting, split, questions, data_dir, host, port, max_k, **options) -> None:
    """Serve a page to ask one question and see every stage, and the JSON API (/search, /answer, /health).

    Questions of the named split (default: the demo dev set) get their gold and answer flags.
    Without --model the server retrieves only, and says how to add a reader.
    """
    import uvicorn

    from ifqa.serve.app import create_app  # the web app (FastAPI), for serve alone

    reader_options = {k: READER_DEFAULTS.get(k) if v is None else v for k, v in options.items() if k in READER_FIELDS}
    reader = from_options(SharedDeviceReaderConfig, reader_options)
    retrieval = retrieval_config(options, k=10, device=reader.device)
    service = QAService(
        retrieval, reader, [question_source(setting, split, questions, data_dir)], api_key, Limits(max_k=max_k)
    )
    log.info(
        "ifqa serve on http://%s:%d (%s%s%s)",
        host,
        port,
        " + ".join(r.name for r in service.pipeline.retrievers),
        f", reranker {retrieval.rerank}" if retrieval.rerank else "",
        f", reader {reader.model}" if reader.model else ", no reader",
    )
    uvicorn.run(create_app(service), host=host, port=port, log_level="warning")


setattr(serve, RUNS_UNTIL_STOPPED, True)  # SIGTERM ends it: nothing to rerun to resume
COMMANDS = [serve]
