"""The `ifqa` command line: a thin layer over the stage modules.

Each command imports its stage inside the function body, so `ifqa --help` stays instant.
User mistakes raise IfqaError and are printed as one line with a non-zero exit.
"""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path

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
    for noisy in ("bm25s", "sentence_transformers", "transformers", "faiss", "httpx"):
        logging.getLogger(noisy).setLevel(max(level, logging.WARNING))


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
@click.option("--batch-size", default=200, show_default=True, help="Records per batch, at most (a batch also closes at 1 MB); the unit of resuming.")
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


# --- index and retrieve ----------------------------------------------------------------------


@cli.group()
def index() -> None:
    """Build BM25 and dense indexes of a passage collection."""


@index.command("bm25")
@click.option("--corpus", required=True, type=click.Path(dir_okay=False), help="passages.jsonl or DPR .tsv")
@click.option("--index", "index_dir", required=True, type=click.Path(file_okay=False), help="Index folder to create.")
@click.option("--backend", type=click.Choice(["bm25s", "pyserini"]), default="bm25s", show_default=True)
@click.option("--k1", default=0.9, show_default=True, type=float)
@click.option("--b", default=0.4, show_default=True, type=float)
@click.option("--threads", default=1, show_default=True, help="Indexing threads (pyserini).")
@click.option("--force", is_flag=True, help="Replace an existing index folder.")
@click.option("--no-progress", is_flag=True)
def index_bm25(corpus, index_dir, backend, k1, b, threads, force, no_progress) -> None:
    """BM25 over title + text (bm25s by default; Lucene through pyserini on request)."""
    if backend == "pyserini":
        from ifqa.retrieval import lucene

        manifest = lucene.build(corpus, index_dir, k1=k1, b=b, threads=threads, force=force)
    else:
        from ifqa.retrieval import bm25

        manifest = bm25.build(corpus, index_dir, k1=k1, b=b, force=force, progress=not no_progress)
    click.echo(f"{index_dir}: {manifest['engine']}, {manifest['passages']} passages, "
               f"{manifest['bytes'] / 1e6:.1f} MB, {manifest['build_seconds']} s")


@index.command("dense")
@click.option("--corpus", required=True, type=click.Path(dir_okay=False), help="passages.jsonl or DPR .tsv")
@click.option("--index", "index_dir", required=True, type=click.Path(file_okay=False), help="Index folder.")
@click.option("--encoder", default="sentence-transformers/all-MiniLM-L6-v2", show_default=True,
              help="sentence-transformers model or DPR context encoder: hub id or local folder.")
@click.option("--query-encoder", help="DPR question encoder (default: derived from --encoder).")
@click.option("--index-type", type=click.Choice(["flat", "hnsw", "ivfpq"]), default="flat", show_default=True)
@click.option("--shard", help="Encode only shard i of N (i/N, from 0); run once more without it to build the index.")
@click.option("--batch-size", default=64, show_default=True)
@click.option("--chunk-size", default=4096, show_default=True, help="Passages per embedding file (the unit of resuming).")
@click.option("--max-length", type=int, help="Truncate inputs to this many tokens (default: the model's limit).")
@click.option("--device", help="cpu, cuda, cuda:1 ... (default: GPU when present)")
@click.option("--force", is_flag=True, help="Rebuild an existing index.")
@click.option("--no-progress", is_flag=True)
def index_dense(corpus, index_dir, encoder, query_encoder, index_type, shard, batch_size, chunk_size, max_length,
                device, force, no_progress) -> None:
    """Dense index: bi-encoder embeddings (resumable, shardable) + FAISS."""
    from ifqa.retrieval import dense

    manifest = dense.build(corpus, index_dir, encoder, query_encoder, index_type, dense.parse_shard(shard),
                           batch_size, device, force, progress=not no_progress, chunk=chunk_size,
                           max_length=max_length)
    if manifest is None:
        click.echo(f"{index_dir}: shard {shard} encoded")
    else:
        click.echo(f"{index_dir}: faiss {index_type}, {manifest['passages']} passages, "
                   f"index {manifest['index_bytes'] / 1e6:.1f} MB, {manifest['build_seconds']} s")


def _weights(value: str | None) -> list[float] | None:
    if not value:
        return None
    try:
        return [float(part) for part in value.split(",")]
    except ValueError:
        raise IfqaError(f"--weights must be numbers separated by commas, got {value!r}") from None


@cli.command()
@click.option("--index", "indexes", multiple=True, help="Index folder (repeat for hybrid), or prebuilt:NAME. Default: the demo collection.")
@click.option("--k", default=20, show_default=True, help="Passages per question.")
@question_options
@click.option("--query", help="One ad-hoc question: print its top passages instead of writing a run.")
@click.option("--output", "-o", type=click.Path(dir_okay=False), help="Run file (default runs/<questions>-k<k>.jsonl).")
@click.option("--fusion", type=click.Choice(["rrf", "linear"]), default="rrf", show_default=True, help="How several indexes combine.")
@click.option("--weights", help="Per-index fusion weights, e.g. 0.3,0.7.")
@click.option("--corpus", type=click.Path(dir_okay=False), help="The collection file, if it moved since indexing.")
@click.option("--batch-size", default=64, show_default=True)
@click.option("--threads", default=2, show_default=True, help="Scoring threads.")
@click.option("--device", help="Device for dense query encoding (cpu, cuda).")
@click.option("--json", "as_json", is_flag=True, help="Print the recall report as JSON.")
@click.option("--no-progress", is_flag=True)
def retrieve(indexes, k, setting, split, questions, data_dir, query, output, fusion, weights, corpus, batch_size,
             threads, device, as_json, no_progress) -> None:
    """Retrieve passages for a question set, write the run file and print recall@K."""
    from ifqa import data as ifqa_data
    from ifqa import evaluation, report
    from ifqa.retrieval.index import open_index
    from ifqa.retrieval.run import retrieve_to_file, search

    if not indexes:
        from ifqa import demo

        indexes = (str(demo.index_path("bm25")),)
    retrievers = [open_index(spec, corpus, device) for spec in indexes]
    if query:
        hits = search(retrievers, [query], k, fusion, _weights(weights), threads)[0]
        rows = []
        for rank, (position, score) in enumerate(hits, start=1):
            passage = retrievers[0].passages[position]
            rows.append([rank, f"{score:.3f}", passage["id"], passage["title"], passage["text"][:90] + "..."])
        click.echo(report.table(["rank", "score", "id", "title", "text"], rows))
        return
    examples = ifqa_data.resolve_examples(setting, split, questions, data_dir)
    source = questions or f"{setting or 'demo'}:{split or 'dev'}"
    if output is None:
        label = Path(questions).stem if questions else f"{setting or 'demo'}-{split or 'dev'}"
        output = Path("runs") / f"{label}-k{k}.jsonl"
    records = retrieve_to_file(retrievers, examples, output, k, fusion, _weights(weights), batch_size, threads,
                               progress=not no_progress, source=str(source))
    result = evaluation.summarize_run(records)
    click.echo(json.dumps(result) if as_json else f"run: {output}\n\n" + report.format_run_report(result))


@cli.command("convert")
@click.argument("source", type=click.Path(dir_okay=False))
@click.option("--from", "from_", type=click.Choice(["run", "trec", "dpr"]), default="run", show_default=True)
@click.option("--to", "to", type=click.Choice(["run", "trec", "dpr"]), required=True)
@click.option("--output", "-o", required=True, type=click.Path(dir_okay=False))
@question_options
@click.option("--corpus", type=click.Path(dir_okay=False), help="The collection (needed to read a TREC run).")
@click.option("--tag", default="ifqa", show_default=True, help="Run tag for TREC output.")
def convert(source, from_, to, output, setting, split, questions, data_dir, corpus, tag) -> None:
    """Convert runs between ifqa's JSONL, TREC run files and DPR's retrieval JSON."""
    from ifqa import data as ifqa_data
    from ifqa.retrieval import convert as conv
    from ifqa.runs import read_run

    if from_ == to:
        raise IfqaError("--from and --to are the same format")
    if from_ == "run":
        records = read_run(source)
        (conv.run_to_trec(records, output, tag) if to == "trec" else conv.run_to_dpr(records, output))
        count = len(records)
    else:
        if to != "run":
            raise IfqaError("convert TREC or DPR files to 'run' first")
        examples = ifqa_data.resolve_examples(setting, split, questions, data_dir)
        if from_ == "trec":
            if not corpus:
                raise IfqaError("--corpus is needed to read passage texts for a TREC run")
            count = conv.trec_to_run(source, examples, corpus, output)
        else:
            count = conv.dpr_to_run(source, examples, output)
    click.echo(f"{output}: {count} questions")


# --- read ------------------------------------------------------------------------------------


@cli.command()
@click.option("--reader", type=click.Choice(["llm", "fid"]), required=True)
@click.option("--mode", type=click.Choice(["qa", "cot", "genread", "open"]), default="qa", show_default=True, help="LLM: closed-book, chain-of-thought, GenRead, open-book.")
@click.option("--cot", is_flag=True, help="LLM: add chain-of-thought to open and genread.")
@click.option("--model", help="LLM: model name on the endpoint, or a local path/hub id with --backend hf.")
@click.option("--backend", type=click.Choice(["openai", "hf"]), default="openai", show_default=True, help="LLM: OpenAI-compatible endpoint or local transformers.")
@click.option("--base-url", envvar="OPENAI_BASE_URL", help="LLM: endpoint (vLLM, llama.cpp, Ollama...); default OpenAI.")
@click.option("--api-key", help="LLM: API key (default $OPENAI_API_KEY). Never logged or stored.")
@click.option("--completions", is_flag=True, help="LLM: use the completions API instead of chat.")
@click.option("--run", "run_path", type=click.Path(dir_okay=False), help="Run file with retrieved passages (open mode, FiD).")
@click.option("--passages", default=5, show_default=True, help="LLM open mode: top passages in the prompt.")
@click.option("--demos", default=4, show_default=True, help="LLM: in-context demonstrations.")
@click.option("--demo-selection", type=click.Choice(["random", "similar"]), default="random", show_default=True)
@click.option("--train", "train_path", type=click.Path(dir_okay=False), help="LLM: demonstration pool (default: the setting's train split).")
@click.option("--seed", default=0, show_default=True)
@click.option("--samples", default=1, show_default=True, help="LLM: self-consistency samples (majority vote).")
@click.option("--temperature", default=None, type=float, help="LLM: sampling temperature (default 0, or 0.7 with --samples > 1).")
@click.option("--max-tokens", type=int, help="LLM: tokens to generate (default 32, or 256 with reasoning).")
@click.option("--max-prompt-tokens", type=int, help="LLM: prompt budget (default: the model's window minus --max-tokens; 4096 if unknown).")
@click.option("--concurrency", default=4, show_default=True, help="LLM: requests in flight.")
@click.option("--batch-size", default=8, show_default=True, help="Local models: questions per generation batch.")
@click.option("--cache", "cache_path", type=click.Path(dir_okay=False), help="LLM response cache (default <ifqa cache>/llm-cache.sqlite).")
@click.option("--no-cache", is_flag=True, help="LLM: do not read or write the response cache.")
@click.option("--prompts-dir", type=click.Path(file_okay=False), help="LLM: templates folder (default: the installed prompts).")
@click.option("--checkpoint", type=click.Path(file_okay=False), help="FiD: training folder or checkpoint folder.")
@click.option("--beams", default=1, show_default=True, help="FiD: beam size (1 = greedy).")
@click.option("--device", help="cpu, cuda ...")
@question_options
@click.option("--output", "-o", type=click.Path(dir_okay=False), help="Predictions JSONL (default runs/<questions>-<reader>-<mode>.jsonl).")
@click.option("--no-progress", is_flag=True)
def read(reader, mode, cot, model, backend, base_url, api_key, completions, run_path, passages, demos, demo_selection,
         train_path, seed, samples, temperature, max_tokens, max_prompt_tokens, concurrency, batch_size, cache_path,
         no_cache, prompts_dir, checkpoint, beams, device, setting, split, questions, data_dir, output, no_progress) -> None:
    """Answer questions with an LLM (prompted) or a trained FiD model; writes predictions JSONL."""
    from ifqa import data as ifqa_data

    examples = ifqa_data.resolve_examples(setting, split, questions, data_dir)
    label = Path(questions).stem if questions else f"{setting or 'demo'}-{split or 'dev'}"
    source = questions or f"{setting or 'demo'}:{split or 'dev'}"
    if reader == "fid":
        from ifqa.readers import fid

        if not checkpoint or not run_path:
            raise IfqaError("FiD reading needs --checkpoint and --run")
        output = output or Path("runs") / f"{label}-fid.jsonl"
        fid.read_to_file(checkpoint, examples, run_path, output, batch_size=batch_size, beams=beams, device=device,
                         progress=not no_progress, source=str(source))
        click.echo(f"predictions: {output}")
        return
    from ifqa.readers import backends, llm
    from ifqa.readers.cache import ResponseCache

    if not model:
        raise IfqaError("--model is required for the LLM reader")
    if backend == "hf":
        engine = backends.HFBackend(model, device, batch_size)
    else:
        engine = backends.OpenAIBackend(model, base_url, api_key, chat=not completions)
    train = ifqa_data.load_examples(train_path) if train_path else _train_split(setting, data_dir)
    if demos:
        log.info("demonstrations from %s (%d questions)", train_path or f"the {setting or 'demo'} train split", len(train))
    config = llm.ReaderConfig(mode=mode, cot=cot, passages=passages, demos=demos, selection=demo_selection, seed=seed,
                              samples=samples, temperature=temperature if temperature is not None else (0.7 if samples > 1 else 0.0),
                              max_tokens=max_tokens, max_prompt_tokens=max_prompt_tokens, concurrency=concurrency,
                              prompts_dir=prompts_dir, setting=setting or "demo")
    cache = None if no_cache else ResponseCache(cache_path)
    exclude = {e.question.strip() for e in examples}
    output = output or Path("runs") / f"{label}-llm-{mode}{'-cot' if cot and mode in ('open', 'genread') else ''}.jsonl"
    reader_ = llm.LLMReader(engine, config, train, cache, exclude)
    llm.read_to_file(reader_, examples, output, run_path, progress=not no_progress, source=str(source))
    counters = reader_.counters.public()
    click.echo(f"predictions: {output}\nrequests: {counters['requests']}  cache hits: {counters['cache_hits']}  "
               f"prompt tokens: {counters['prompt_tokens']}  completion tokens: {counters['completion_tokens']}")


@cli.command()
@click.option("--reader", type=click.Choice(["fid"]), default="fid", show_default=True)
@click.option("--run", "run_path", required=True, type=click.Path(dir_okay=False), help="Training run (questions, answers, retrieved passages).")
@click.option("--dev-run", type=click.Path(dir_okay=False), help="Dev run: EM every --eval-every steps, best checkpoint kept.")
@click.option("--model", default="t5-base", show_default=True, help="T5 hub id or local folder (t5-base, google/flan-t5-large, ...).")
@click.option("--output", "-o", required=True, type=click.Path(file_okay=False), help="Training folder (best/, last/, train_log.jsonl).")
@click.option("--steps", default=15000, show_default=True)
@click.option("--lr", default=1e-4, show_default=True)
@click.option("--batch-size", default=1, show_default=True)
@click.option("--accumulation", default=1, show_default=True, help="Gradient accumulation steps.")
@click.option("--warmup-steps", default=1000, show_default=True)
@click.option("--weight-decay", default=0.01, show_default=True)
@click.option("--eval-every", default=500, show_default=True)
@click.option("--save-every", type=int, help="Also save the resumable state every N steps.")
@click.option("--stop-after", type=int, help="Stop this invocation after N steps (state saved; rerun to continue).")
@click.option("--n-context", default=20, show_default=True)
@click.option("--text-maxlength", default=250, show_default=True)
@click.option("--answer-maxlength", default=20, show_default=True)
@click.option("--gradient-checkpointing", is_flag=True)
@click.option("--no-bf16", is_flag=True, help="Train in fp32 on GPU.")
@click.option("--seed", default=0, show_default=True)
@click.option("--device")
@click.option("--no-progress", is_flag=True)
def train(reader, run_path, dev_run, model, output, steps, lr, batch_size, accumulation, warmup_steps, weight_decay,
          eval_every, save_every, stop_after, n_context, text_maxlength, answer_maxlength, gradient_checkpointing, no_bf16, seed,
          device, no_progress) -> None:
    """Train a Fusion-in-Decoder reader on a run file; rerun the same command to resume."""
    from ifqa.readers import fid

    config = fid.TrainConfig(model=model, steps=steps, lr=lr, batch_size=batch_size, accumulation=accumulation,
                             warmup_steps=warmup_steps, weight_decay=weight_decay, eval_every=eval_every,
                             save_every=save_every, seed=seed, gradient_checkpointing=gradient_checkpointing,
                             bf16=not no_bf16, n_context=n_context, text_maxlength=text_maxlength,
                             answer_maxlength=answer_maxlength)
    state = fid.train(run_path, dev_run, output, config, device, progress=not no_progress, stop_after=stop_after)
    last = state["log"][-1] if state["log"] else {}
    click.echo(f"{output}: step {state['step']}, last loss {last.get('loss')}, best dev EM {state['best_em']:.2f}")


@cli.group()
def experiment() -> None:
    """Run experiment grids from YAML configs (experiments/*.yaml)."""


@experiment.command("run")
@click.argument("config", type=click.Path(dir_okay=False))
@click.option("--force", is_flag=True, help="Rerun every stage, up to date or not.")
@click.option("--no-progress", is_flag=True)
def experiment_run(config, force, no_progress) -> None:
    """Retrieve -> read -> evaluate; stages whose outputs are up to date are skipped."""
    from ifqa.experiments import output_dir, run_experiment

    run_experiment(config, force, progress=not no_progress)
    output = output_dir(config)
    click.echo((output / "results.md").read_text())
    click.echo(f"written: {output / 'results.md'}, results.csv, results.json")


def _train_split(setting: str | None, data_dir):
    from ifqa import data as ifqa_data

    return ifqa_data.load_split(setting or "demo", "train", data_dir)


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
