"""CPU inference backends side by side: fp32 PyTorch (what ifqa ran before) beside ONNX Runtime and
OpenVINO, fp32 and int8, for the dense encoder and the cross-encoder, on the same texts in one run.

    python benchmarks/cpu_backends.py [--passages 1000] [--pairs 1000] [--recall 20000] [--reranker DIR]
                                      [--rerank-run RUN --rerank-depth 20]

Encoding: passages/s of ``ifqa``'s encoder (all-MiniLM-L6-v2, max 128 tokens, batch 64) and each
export's lowest and mean cosine to fp32. Reranking: pairs/s of the cross-encoder (``--reranker``, a
trained ifqa reranker; default all-MiniLM-L6-v2 with a fresh scoring head: the real cost, not a
real ranking) and the rank correlation of its scores with fp32. ``--recall N`` also builds a dense
index per backend over IfQA's gold passages plus N other mini-wiki passages and reports the dev
gold recall@1/5/20 (700 questions). ``--rerank-run`` reranks a dev run with ``--reranker`` on each
backend through `ifqa rerank` and reports gold R@1/R@5 beside fp32 PyTorch's. Exports are made first
and not timed (they are cached); speeds are the median of ``--rounds`` rounds in which the backends
take turns. Reads ../shared/data (mini-wiki passages, IfQA dev); without it, the demo passages.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import ROOT, SHARED, WORK, Parser, ifqa, machine, markdown_table, timed  # noqa: E402

sys.path.insert(0, str(ROOT))
BACKENDS = ["torch", "onnx", "onnx-int8", "openvino", "openvino-int8"]


def mini_wiki() -> Path | None:
    corpus = WORK / "mini-wiki.jsonl"
    if not corpus.exists() and SHARED.is_dir():
        timed(
            ifqa(
                "corpus",
                "build",
                SHARED / "wiki" / "enwiki2015_sample_articles.jsonl.gz",
                SHARED / "wiki" / "ifqa_contexts.jsonl",
                "-o",
                corpus,
                "--workers",
                "2",
                "--no-progress",
            )
        )
    return corpus if corpus.exists() else None


def passages(n: int, skip: int = 1000) -> list[dict]:
    corpus = mini_wiki()
    if corpus is None:
        import gzip

        from ifqa.datasets.demo import packaged_passages

        with gzip.open(packaged_passages(), "rt", encoding="utf-8") as handle:
            rows = [json.loads(line) for line in handle]
        return [rows[i % len(rows)] for i in range(n)]
    with open(corpus, encoding="utf-8") as handle:
        rows = [json.loads(line) for _, line in zip(range(skip + n), handle)]
    return [{"title": r.get("title") or "", "text": r["text"]} for r in rows[skip:]]


def interleaved(runners: dict, rounds: int) -> dict[str, tuple[float, object]]:
    """Median seconds of each runner over ``rounds`` rounds, the backends taking turns within each
    round (this machine's speed drifts: back-to-back runs of one backend would carry the drift into
    the ratios), and each one's last output."""
    import statistics

    seconds: dict[str, list[float]] = {name: [] for name in runners}
    outputs: dict[str, object] = {}
    for _ in range(rounds):
        for name, run in runners.items():
            started = time.time()
            outputs[name] = run()
            seconds[name].append(time.time() - started)
    return {name: (statistics.median(values), outputs[name]) for name, values in seconds.items()}


def _loaded(load) -> tuple[dict, dict]:
    """Each backend's model, loaded (and exported, once, untimed) and warmed; a missing extra is a row."""
    models, missing = {}, {}
    for backend in BACKENDS:
        try:
            models[backend] = load(backend)
        except Exception as exc:  # a missing extra: say so in the table
            missing[backend] = str(exc).splitlines()[0][:80]
    return models, missing


def encoding(texts: list[dict], rounds: int) -> list[dict]:
    import numpy as np

    from ifqa.retrieval.encoders import load_encoder

    models, missing = _loaded(lambda backend: load_encoder(device="cpu", max_length=128, backend=backend))
    for encoder in models.values():
        encoder.encode_passages(texts[:64], 64)
    timed_runs = interleaved({b: (lambda e=e: e.encode_passages(texts, 64)) for b, e in models.items()}, rounds)
    rows = [{"backend": b, "passages/s": m} for b, m in missing.items()]
    base, reference = None, None
    for backend, (seconds, vectors) in timed_runs.items():
        rate = len(texts) / seconds
        reference = vectors if reference is None else reference
        base = rate if base is None else base
        cosines = np.sum(vectors * reference, axis=1)
        rows.append(
            {
                "backend": backend,
                "passages/s": rate,
                "x fp32 torch": rate / base,
                "lowest cosine": f"{cosines.min():.4f}",
                "mean cosine": f"{cosines.mean():.5f}",
            }
        )
        print(json.dumps(rows[-1]), flush=True)
    return rows


def cross_encoder(folder: str | None) -> str:
    """A trained reranker, or MiniLM with a fresh one-logit head (the cost of a real one)."""
    if folder:
        return folder
    target = WORK / "minilm-cross-encoder"
    if not (target / "config.json").exists():
        import torch
        from transformers import AutoModelForSequenceClassification, AutoTokenizer

        from ifqa.retrieval.encoders import resolve

        source = resolve("all-MiniLM-L6-v2")
        torch.manual_seed(0)
        AutoModelForSequenceClassification.from_pretrained(source, num_labels=1).save_pretrained(target)
        AutoTokenizer.from_pretrained(source).save_pretrained(target)
    return str(target)


def reranking(texts: list[dict], model: str, rounds: int) -> list[dict]:
    import numpy as np

    from ifqa.retrieval.rerank import load_reranker

    questions = [f"If {p['title'] or 'this'} had never existed, what would be different?" for p in texts[::100]]
    items = [
        (questions[i // 100], [p["text"] for p in texts[i : i + 100]], [0.0] * len(texts[i : i + 100]))
        for i in range(0, len(texts), 100)
    ]
    models, missing = _loaded(
        lambda backend: load_reranker(model, depth=100, device="cpu", max_length=192, backend=backend)
    )
    for reranker in models.values():
        reranker.score_many(items[:1])
    timed_runs = interleaved({b: (lambda r=r: r.score_many(items)) for b, r in models.items()}, rounds)
    rows = [{"backend": b, "pairs/s": m} for b, m in missing.items()]
    base, reference = None, None
    ranks = lambda v: np.argsort(np.argsort(v)).astype(float)  # noqa: E731
    for backend, (seconds, scored) in timed_runs.items():
        scores = np.concatenate([np.asarray(s) for s in scored])
        rate = len(scores) / seconds
        reference = scores if reference is None else reference
        base = rate if base is None else base
        rows.append(
            {
                "backend": backend,
                "pairs/s": rate,
                "x fp32 torch": rate / base,
                "rank correlation": f"{np.corrcoef(ranks(scores), ranks(reference))[0, 1]:.4f}",
            }
        )
        print(json.dumps(rows[-1]), flush=True)
    return rows


def recall(others: int) -> list[dict]:
    """Dev gold recall of a dense index per backend over the gold passages plus ``others`` mini-wiki passages."""
    corpus = mini_wiki()
    if corpus is None:
        return []
    subset = WORK / f"mini-wiki-gold+{others}.jsonl"
    if not subset.exists():
        with open(corpus, encoding="utf-8") as handle, open(subset, "w", encoding="utf-8") as out:
            kept = 0
            for line in handle:
                record = json.loads(line)
                if not record.get("title") or kept < others:  # gold passages are the untitled ones
                    out.write(line)
                    kept += bool(record.get("title"))
    rows = []
    for backend in BACKENDS:
        name, _, quantize = backend.partition("-")
        index = WORK / f"idx-dense-{subset.stem}-{backend}"
        extra = ["--runtime", name] + (["--quantize", quantize] if quantize else [])
        if not (index / "manifest.json").exists():
            seconds, _, _ = timed(
                ifqa(
                    "index",
                    "dense",
                    "--corpus",
                    subset,
                    "-o",
                    index,
                    "--force",
                    "--no-progress",
                    "--device",
                    "cpu",
                    *extra,
                )
            )
        else:
            seconds = json.loads((index / "manifest.json").read_text())["build_seconds"]
        _, _, result = timed(
            ifqa(
                "retrieve",
                "--index",
                index,
                "--setting",
                "supervised",
                "--split",
                "dev",
                "--k",
                "20",
                "-o",
                WORK / f"run-{index.name}.jsonl",
                "--json",
                "--no-progress",
            )
        )
        gold = json.loads(result.stdout)["recall"]["gold"]
        rows.append({"backend": backend, "index s": seconds, **{f"gold R@{k}": gold[str(k)] for k in (1, 5, 20)}})
        print(json.dumps(rows[-1]), flush=True)
    return rows


def rerank_quality(run: str, model: str, depth: int) -> list[dict]:
    """IfQA dev gold recall after `ifqa rerank` of ``run``'s top ``depth`` with each backend (the
    command itself, start-up and exporting included in its seconds)."""
    rows = []
    for backend in BACKENDS:
        name, _, quantize = backend.partition("-")
        out = WORK / f"reranked-{Path(run).stem}-d{depth}-{backend}.jsonl"
        extra = ["--runtime", name] + (["--quantize", quantize] if quantize else [])
        seconds, _, result = timed(
            ifqa(
                "rerank",
                "--run",
                run,
                "--model",
                model,
                "--depth",
                depth,
                "-o",
                out,
                "--json",
                "--no-progress",
                "--device",
                "cpu",
                *extra,
            )
        )
        gold = json.loads(result.stdout)["recall"]["gold"]
        pairs = sum(min(depth, len(json.loads(line)["ctxs"])) for line in open(run, encoding="utf-8"))
        rows.append(
            {
                "backend": backend,
                "seconds": seconds,
                "pairs/s": pairs / seconds,
                **{f"gold R@{k}": gold[str(k)] for k in (1, 5) if str(k) in gold},
            }
        )
        print(json.dumps(rows[-1]), flush=True)
    base = rows[0]
    for row in rows[1:]:
        for k in (1, 5):
            row[f"R@{k} vs torch"] = f"{row[f'gold R@{k}'] - base[f'gold R@{k}']:+.2f}"
    return rows


def main() -> None:
    parser = Parser(description=__doc__.splitlines()[0])
    parser.add_argument("--passages", type=int, default=1000, help="passages encoded per backend")
    parser.add_argument("--pairs", type=int, default=1000, help="(question, passage) pairs scored per backend")
    parser.add_argument("--reranker", help="a trained reranker folder (default: MiniLM with a fresh head)")
    parser.add_argument(
        "--recall", type=int, default=0, at_least=0, help="also index gold + N mini-wiki passages per backend"
    )
    parser.add_argument(
        "--backends",
        nargs="+",
        default=BACKENDS,
        choices=BACKENDS,
        help="runtimes to measure; torch is always measured too, first, as the others are compared with it",
    )
    parser.add_argument("--skip-speed", action="store_true", help="only the recall part")
    parser.add_argument(
        "--rounds", type=int, default=3, help="timed rounds, backends taking turns; the median is reported"
    )
    parser.add_argument(
        "--rerank-run", help="a dev run to rerank with --reranker on each backend (recall after reranking)"
    )
    parser.add_argument(
        "--rerank-depth", type=int, default=100, help="passages reranked per question with --rerank-run"
    )
    args = parser.parse_args()
    BACKENDS[:] = ["torch"] + [b for b in args.backends if b != "torch"]  # the base the others are compared with
    os.environ.setdefault("IFQA_DATA_DIR", str(SHARED / "ifqa"))
    WORK.mkdir(parents=True, exist_ok=True)
    import torch

    print(f"machine: {machine()}; torch threads {torch.get_num_threads()}\n")
    if not args.skip_speed:
        texts = passages(max(args.passages, args.pairs))
        print("## Dense encoding (all-MiniLM-L6-v2, 128 tokens, batch 64)\n")
        print(markdown_table(encoding(texts[: args.passages], args.rounds), digits=1))
        print("\n## Cross-encoder scoring (192 tokens, 100 passages a question)\n")
        print(markdown_table(reranking(texts[: args.pairs], cross_encoder(args.reranker), args.rounds), digits=1))
    if args.recall:
        print(f"\n## Dense retrieval, IfQA dev, gold passages + {args.recall:,} others\n")
        print(markdown_table(recall(args.recall), digits=2))
    if args.rerank_run:
        if not args.reranker:
            parser.error("--rerank-run needs --reranker (a trained reranker folder)")
        print(f"\n## Reranking {args.rerank_run}'s top {args.rerank_depth} with {args.reranker}\n")
        print(markdown_table(rerank_quality(args.rerank_run, args.reranker, args.rerank_depth), digits=2))


if __name__ == "__main__":
    main()
