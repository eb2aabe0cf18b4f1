"""`ifqa rerank` over an IfQA-shaped run beside ``CrossEncoder.predict`` and the model alone; reranker
training; `ifqa serve --rerank` latency."""

from __future__ import annotations

import json
import math
import os
import statistics
import time
from pathlib import Path

from gpu.inputs import demo_passages
from gpu.suite import (
    GOALS,
    Suite,
    command,
    host_text,
    judge_command,
    library_default,
    model_alone,
    precision_name,
    release,
    row,
    startup_text,
    steady_text,
    warmed_rate,
)


def question_examples(n: int) -> list:
    """``n`` IfQA questions: the demo's (dev and train: answers, gold passages) repeated with new ids."""
    from ifqa.artifacts import Example
    from ifqa.datasets.demo import load_demo

    base = load_demo("dev") + load_demo("train")
    return [Example(str(i), e.question, e.answers, e.context) for i, e in ((i, base[i % len(base)]) for i in range(n))]


_RUN: dict = {}  # what forked run-writing workers read (set before the pool starts)


def contexts(i: int, example, depth: int, passages: list[dict], by_text: dict) -> list[dict]:
    """Question ``i``'s top ``depth``: consecutive collection passages (one article's, mostly), each
    passage's words rotated by a per-slot amount (no two slots share a text), scores descending;
    for three questions in four, its gold passage, as the collection holds it, at a rank of its own."""
    ctxs = []
    for j in range(depth):
        passage = passages[(53 * i + j) % len(passages)]
        words = passage["text"].split(" ")
        shift = (7 * i + j) % len(words)
        ctxs.append(
            {
                "id": f"{passage['id']}~{shift}",
                "title": passage["title"],
                "text": " ".join(words[shift:] + words[:shift]),
                "score": float(depth - j),
            }
        )
    gold = by_text.get(example.context[0]) if example.context else None
    if gold is not None and i % 4 != 3:
        ctxs[(13 * i) % depth] = {**gold, "score": ctxs[(13 * i) % depth]["score"]}
    return ctxs


def _run_lines(bounds: tuple[int, int]) -> str:
    from ifqa.eval.passages import run_record

    examples, depth, passages, by_text = _RUN["examples"], _RUN["depth"], _RUN["passages"], _RUN["by_text"]
    return "".join(
        json.dumps(run_record(examples[i], contexts(i, examples[i], depth, passages, by_text)), ensure_ascii=False)
        + "\n"
        for i in range(*bounds)
    )


def write_ifqa_run(folder: Path, questions: int, depth: int, workers: int) -> tuple[Path, Path, Path]:
    """The questions file (IfQA JSON), the run of all of them and the start-up run of the first one,
    each run flagged and with the manifest `ifqa retrieve` writes, naming the questions file."""
    import multiprocessing

    from ifqa.artifacts import QuestionSet, write_manifest
    from ifqa.datasets.ifqa import load_examples

    examples = question_examples(questions)
    questions_file = folder / "questions.json"
    questions_file.write_text(json.dumps([e.to_json() for e in examples], ensure_ascii=False), encoding="utf-8")
    question_set = QuestionSet(str(questions_file), load_examples(questions_file))
    passages = demo_passages()
    _RUN.update(examples=examples, depth=depth, passages=passages, by_text={p["text"]: p for p in passages})
    run, startup = folder / "run.jsonl", folder / "startup-run.jsonl"
    spans = [(start, min(questions, start + 250)) for start in range(0, questions, 250)]
    with open(run, "w", encoding="utf-8") as handle:
        if workers > 1 and len(spans) > 1:
            with multiprocessing.get_context("fork").Pool(workers) as pool:
                for lines in pool.imap(_run_lines, spans):
                    handle.write(lines)
        else:
            for span in spans:
                handle.write(_run_lines(span))
    startup.write_text(_run_lines((0, 1)), encoding="utf-8")
    indexes = [{"name": "gpu-suite", "engine": "demo collection, repeated", "params": None, "corpus": None}]
    for path, n in ((run, questions), (startup, 1)):
        write_manifest(
            path,
            question_set,
            n=n,
            k=depth,
            query_mode="question",
            indexes=indexes,
            fusion=None,
            weights=None,
            rerankers=[],
            seconds=0.0,
        )
    return questions_file, run, startup


def reranking(suite: Suite) -> dict:
    """`ifqa rerank` as typed, over an IfQA-shaped run, beside ``CrossEncoder.predict`` on the same
    pairs at its defaults and in ifqa's precision and batch, and the model alone."""

    from ifqa.devices import pick_precision, torch_dtype
    from ifqa.retrieval.batching import default_batch_size

    device, size, depth = suite.device, suite.size, suite.size["depth"]
    folder = suite.work.new("rerank")
    folder.mkdir()
    questions = math.ceil(suite.pairs / depth)
    n = questions * depth
    questions_file, run, startup_run = write_ifqa_run(folder, questions, depth, min(8, os.cpu_count() or 1))

    def rerank(run_file: Path, out: Path, phases=None) -> tuple[float, dict, float]:
        _, seconds, result = command(
            "rerank",
            "--run",
            run_file,
            "--model",
            suite.folders["reranker"],
            "--depth",
            depth,
            "--questions",
            questions_file,
            "-o",
            out,
            "--json",
            "--no-progress",
            "--device",
            device,
            phases=phases,
        )
        return seconds, json.loads(result.stdout), result.cpu_seconds

    release(device)
    phases = folder / "startup-phases.json"
    startup, _, startup_cpu = rerank(startup_run, folder / "startup-reranked.jsonl", phases)
    seconds, report, cpu = rerank(run, folder / "reranked.jsonl")
    if report.get("n") != questions or "gold" not in report.get("recall", {}):
        raise RuntimeError(f"the reranked run's report lacks its {questions} questions or gold recall: {report}")
    (folder / "reranked.jsonl").unlink()  # the suite's own, large
    rate = n / seconds
    again, _, again_cpu = rerank(run, folder / "reranked.jsonl")  # its passages' tokens now in the cache
    (folder / "reranked.jsonl").unlink()
    warm = f"; again over the same passages (tokens from the cache): {n / again:,.0f} pairs/s, " + host_text(
        again_cpu, startup_cpu, n - depth
    )

    examples, passages = question_examples(min(questions, size["sample_pairs"] // depth)), demo_passages()
    by_text = {p["text"]: p for p in passages}
    pairs = [(e.question, c["text"]) for i, e in enumerate(examples) for c in contexts(i, e, depth, passages, by_text)]
    batch = default_batch_size(device)
    dtype = torch_dtype(pick_precision("auto", device, "rerank"))  # ifqa's default: weights cast, no autocast
    default_batch, default, same, ceiling = predict_references(suite, pairs, dtype, batch)
    release(device)
    share = startup / seconds
    judge_command(
        suite.goals,
        "rerank",
        GOALS["rerank"],
        n,
        dict(ifqa=rate, defaults=default, same=same, ceiling=ceiling, startup=startup),
        share,
        "pairs",
        "--pairs",
    )
    gold = report["recall"]["gold"]
    return row(
        f"`ifqa rerank`, {questions:,} IfQA-shaped questions x top {depth} ({n:,} pairs), {size['bert_name']}, "
        f"{precision_name(dtype)} batch {batch}, start-up, flags and files included",
        rate,
        "pairs/s",
        default=default,
        same=same,
        ceiling=ceiling,
        startup=startup_text(startup, depth, seconds, "pairs", phases),
        note=f"command {seconds:.1f} s (its passages tokenized into the cache){warm}; "
        f"{steady_text(n - depth, seconds, startup, 'pairs')}; past start-up (reading, tokenizing, flags, writing: "
        f"what no GPU overlaps), {host_text(cpu, startup_cpu, n - depth)}; reranked gold R@{depth} "
        f"{gold.get(str(depth), '?')}; references and ceiling on {len(pairs):,} of the pairs: predict at "
        f"its defaults fp32 batch {default_batch}, then {precision_name(dtype)} weights batch {batch} (ifqa casts "
        f"its weights to {precision_name(dtype)} too: no autocast)",
    )


def predict_references(suite: Suite, pairs: list[tuple[str, str]], dtype, batch: int) -> tuple:
    """``CrossEncoder.predict`` at its defaults (fp32, its batch), then with weights in ``dtype`` at
    ``batch``, then the model alone likewise: (default batch, the three rates)."""
    from sentence_transformers import CrossEncoder

    device = suite.device
    model = CrossEncoder(str(suite.folders["reranker"]), device=device)  # the library's defaults: fp32
    default = warmed_rate(
        device,
        len(pairs),
        lambda: model.predict(pairs[:64], show_progress_bar=False),
        lambda: model.predict(pairs, show_progress_bar=False),
    )
    model.model.to(dtype)
    same = warmed_rate(
        device,
        len(pairs),
        lambda: model.predict(pairs[: 2 * batch], batch_size=batch, show_progress_bar=False),
        lambda: model.predict(pairs, batch_size=batch, show_progress_bar=False),
    )
    ceiling = model_alone(
        lambda features: model.model(**features).logits,
        model.tokenizer,
        [q for q, _ in pairs],
        [t for _, t in pairs],
        batch,
        getattr(model, "max_seq_length", None) or 512,
        device,
    )
    return library_default(model.predict), default, same, ceiling


def reranker_training(suite: Suite) -> dict:
    """Seconds for `ifqa train reranker`'s default step shape (30 pairs x 192 tokens), projected to its 800 steps."""
    from ifqa.registry import TRAINABLE
    from ifqa.training.data import TrainingGroup
    from ifqa.training.jobs import train_on_loop
    from ifqa.training.loop import Invocation
    from ifqa.training.recipes import RerankerRecipe

    passages = demo_passages()
    groups = [
        TrainingGroup(
            qid=str(i),
            question=f"If thing {i} changed, what would happen?",
            positives=[passages[i]["text"]],
            negatives=[p["text"] for p in passages[i + 1 : i + 40]],
            other_gold=[],
        )
        for i in range(400)
    ]
    recipe = RerankerRecipe(model=str(suite.folders["bert"]), epochs=1)
    started = time.time()
    how = Invocation(suite.device, progress=False, stop_after=suite.size["train_steps"])
    result = train_on_loop(TRAINABLE.get("reranker"), groups, suite.work.new("reranker-train"), recipe, how)
    seconds = time.time() - started
    per_step = seconds / max(1, result["step"])
    release(suite.device)
    return row(
        f"reranker training, default recipe shape ({result['step']} steps timed)",
        None,
        "s",
        note=f"{per_step * 800:.0f} s projected for 800 steps (start-up included)",
    )


def serve_latency(suite: Suite) -> dict:
    from serve_latency import search, start

    process, url = start(
        ["--rerank", str(suite.folders["reranker"]), "--rerank-depth", "100", "--device", suite.device],
        suite.work.new("serve.log"),
    )
    try:
        questions = [
            f"If the bridge at town {i} were stone, what would cross the river?"
            for i in range(suite.size["serve_requests"])
        ]
        search(url, questions[0], 10)
        latencies = [search(url, q, 10) for q in questions]
    finally:
        process.terminate()
        process.wait(30)
    return row(
        f"`ifqa serve --rerank` /search p50 (demo BM25 + rerank top 100, {len(latencies)} requests)",
        1000 * statistics.median(latencies),
        "ms",
    )
