"""How `ifqa retrieve --k 100` grows with the collection, on the default bm25s index beside the same
collection indexed with `--engine pyserini` (Lucene), projected to the paper's 21M and 27.5M passages.

    python benchmarks/retrieval_scale.py [--sizes 1,2,4,8] [--counts 700,3800] [--no-lucene] [--out FILE]
        [--lucene10-python .venv-3.12/bin/python]

Collections: wiki-800k (774,714 passages, built from ../shared under benchmarks/.work when not given
with ``--collection``) and copies of it as ``bm25_memory.py`` makes them (fresh ids, about one word in
twenty renamed in every copy after the first, so postings and vocabulary both grow): ``--sizes`` are
multiples of it (1, 2, 4, 8: 0.8M, 1.5M, 3.1M, 6.2M). Each is indexed once by each backend (cached
between runs; build seconds and peak memory recorded with the index). Questions: IfQA dev's 700, and
3,800 (IfQA's whole size: dev repeated with fresh ids); ``--counts`` chooses. For each size and
count the two backends' `ifqa retrieve` commands run alternately (which goes first alternates too),
each a fresh process as a user types it (start-up, the run file and its flags included); reported:
wall seconds, questions/s, the command's peak RSS, the index's size on disk, and the top-100 overlap
between the backends' run files (ties at the cut aside: a passage missing from the other list counts
as shared when its score equals that list's last score). The table goes to ``--out`` after every
size, so a run cut short keeps what it measured; then each figure is fitted against the collection's
size (least squares: a line over every size, and the line through the two largest, which a projection
beyond a curve that bends upwards follows) and projected.

Lucene 9.9 and Lucene 10 side by side: one Python cannot hold both pyserinis (1.6 runs on 3.11, 2.x needs
3.12+), so ``pyserini`` is this Python's and ``pyserini-10`` is the engine run by ``--lucene10-python``
(an environment with ifqa and pyserini 2: CI's ``.venv-3.12``, the default where it exists): its
indexes are built and searched by that interpreter's `ifqa`, as its own processes. Both are compared
with bm25s (top-100 overlap) and with each other (wall time ratio).
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

from common import ROOT, SHARED, WORK, Parser, ifqa, machine, markdown_table, timed

DEV = SHARED / "ifqa" / "full_split" / "dev.json"
PROJECT = (21_000_000, 27_500_000)


def sizes_flag(text: str) -> list[int]:
    import argparse

    try:
        values = [int(part) for part in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a comma-separated list of whole numbers") from None
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: every value must be at least 1")
    return sorted(set(values))


def questions_file(source: Path, count: int, folder: Path) -> Path:
    """``count`` questions: ``source``'s, repeated with fresh ids where it holds fewer."""
    examples = json.loads(source.read_text())
    path = folder / f"questions-{count}.json"
    if not path.exists():
        picked = [
            {**examples[i % len(examples)], "idx": f"{examples[i % len(examples)]['idx']}-{i // len(examples)}"}
            for i in range(count)
        ]
        path.write_text(json.dumps(picked))
    return path


def collection(base: Path, copies: int, folder: Path) -> Path:
    if copies == 1:
        return base
    from bm25_memory import synthetic

    return synthetic(base, copies, folder / f"{base.stem}-x{copies}.jsonl")


#: A backend's engine and the Python that runs its commands (None: this one).
ENGINES = {"bm25s": ("bm25s", None), "pyserini": ("pyserini", None), "pyserini-10": ("pyserini", "lucene10")}
PYTHONS: dict[str, str] = {}


def command(backend: str, *args) -> list[str]:
    """``ifqa ARGS`` as the backend's Python runs it."""
    line = ifqa(*args)
    python = ENGINES[backend][1]
    return [PYTHONS[python], *line[1:]] if python else line


def index(corpus: Path, backend: str, folder: Path) -> dict:
    """The collection's index by ``backend`` (built once; its build's seconds and peak MB kept beside it)."""
    out = folder / f"{corpus.stem}-{backend}"
    record = folder / f"{corpus.stem}-{backend}.build.json"
    if (out / "manifest.json").exists() and record.exists():
        return {"folder": out, **json.loads(record.read_text())}
    shutil.rmtree(out, ignore_errors=True)
    engine = ENGINES[backend][0]
    seconds, peak, _ = timed(
        command(backend, "-q", "index", "bm25", "--engine", engine, "--corpus", corpus, "-o", out, "--no-progress")
    )
    built = {"build s": seconds, "build peak MB": peak}
    record.write_text(json.dumps(built))
    return {"folder": out, **built}


def disk_mb(folder: Path) -> float:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file()) / 2**20


def retrieve(backend: str, index_folder: Path, questions: Path, output: Path, threads: int) -> tuple[float, float]:
    args = ["-q", "retrieve", "--index", index_folder, "--questions", questions, "--k", "100", "-o", output]
    seconds, peak, _ = timed(command(backend, *args, "--threads", threads, "--no-progress"))
    return seconds, peak


def overlap(a: Path, b: Path) -> float:
    """Mean share of a's top-k also in b's, a passage tied with b's last score counted as shared."""
    shares = []
    with a.open() as first, b.open() as second:
        for line_a, line_b in zip(first, second):
            ctxs_a, ctxs_b = json.loads(line_a)["ctxs"], json.loads(line_b)["ctxs"]
            if not ctxs_a:
                continue
            ids_b = {c["id"] for c in ctxs_b}
            cut = ctxs_b[-1]["score"] if ctxs_b else float("inf")
            shared = sum(c["id"] in ids_b or abs(c["score"] - cut) <= 1e-4 * max(1.0, abs(cut)) for c in ctxs_a)
            shares.append(shared / len(ctxs_a))
    return sum(shares) / max(1, len(shares))


def fit(points: list[tuple[float, float]]) -> tuple[float, float]:
    """Least-squares line ``a + b n`` through the (n, value) points (one point: through the origin)."""
    import numpy as np

    n, value = (np.array(column, dtype=float) for column in zip(*points))
    if len(points) == 1:
        return 0.0, float(value[0] / n[0])
    slope, intercept = np.polyfit(n, value, 1)
    return float(intercept), float(slope)


def main() -> None:
    parser = Parser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--collection", type=Path, help="the base collection (default: wiki-800k, built from ../shared)"
    )
    parser.add_argument("--questions", type=Path, default=DEV, help="IfQA-format questions (default: IfQA dev)")
    parser.add_argument("--sizes", type=sizes_flag, default=[1, 2, 4, 8], help="multiples of the base collection")
    parser.add_argument("--counts", type=sizes_flag, default=[700, 3800], help="questions per run")
    parser.add_argument("--no-lucene", action="store_true", help="the bm25s index only")
    parser.add_argument(
        "--lucene10-python",
        type=Path,
        default=ROOT / ".venv-3.12" / "bin" / "python",
        help="a Python with ifqa and pyserini 2 (Lucene 10) for the pyserini-10 rows (default: .venv-3.12's, "
        "left out where it does not exist)",
    )
    parser.add_argument(
        "--threads", type=int, default=1, help="scoring threads of both backends (default 1: the curve's figures)"
    )
    parser.add_argument("--work", type=Path, default=WORK / "retrieval-scale", help="collections, indexes, runs")
    parser.add_argument("--out", type=Path, default=WORK / "retrieval_scale.md", help="where the table goes")
    args = parser.parse_args()
    if not args.questions.is_file():
        parser.exit(1, f"retrieval_scale: --questions {args.questions}: no such file (../shared is needed)\n")
    args.work.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("IFQA_DATA_DIR", str(SHARED / "ifqa"))
    base = args.collection or WORK / "wiki-800k.jsonl"
    if not base.exists():
        wiki = SHARED / "wiki"
        files = ["enwiki2015_articles.jsonl.gz", "enwiki2021_articles.jsonl.gz", "ifqa_contexts.jsonl"]
        timed(ifqa("corpus", "build", *[wiki / f for f in files], "-o", base, "--workers", "2", "--no-progress"))
    backends = ["bm25s"] + ([] if args.no_lucene else ["pyserini"])
    if not args.no_lucene and args.lucene10_python.exists():
        PYTHONS["lucene10"] = str(args.lucene10_python)
        backends.append("pyserini-10")
    measured = args.work / "measured.json"  # rows of earlier runs (other sizes) join the table and the fit
    kept = json.loads(measured.read_text()) if measured.exists() else []
    rows: list[dict] = []
    for step, copies in enumerate(args.sizes):
        corpus = collection(base, copies, args.work)
        passages = sum(1 for _ in corpus.open())
        indexes = {backend: index(corpus, backend, args.work) for backend in backends}
        for count in args.counts:
            questions = questions_file(args.questions, count, args.work)
            order = backends if step % 2 == 0 else backends[::-1]  # who goes first alternates
            runs = {}
            for backend in order:
                runs[backend] = args.work / f"run-{corpus.stem}-{backend}-{count}.jsonl"
                seconds, peak = retrieve(backend, indexes[backend]["folder"], questions, runs[backend], args.threads)
                built = indexes[backend]
                rows.append(
                    {
                        "passages": passages,
                        "questions": count,
                        "backend": backend,
                        "retrieve s": seconds,
                        "q/s": count / seconds,
                        "retrieve peak MB": peak,
                        "index MB on disk": disk_mb(built["folder"]),
                        "build s": built["build s"],
                        "build peak MB": built["build peak MB"],
                        "top-100 overlap": "",
                    }
                )
                print(json.dumps(rows[-1]), flush=True)
            for row in rows[-len(backends) :]:  # each Lucene's overlap with bm25s
                if row["backend"] != "bm25s":
                    row["top-100 overlap"] = f"{overlap(runs['bm25s'], runs[row['backend']]):.4f}"
        key = lambda r: (r["passages"], r["questions"], r["backend"])  # noqa: E731
        kept = [r for r in kept if key(r) not in {key(new) for new in rows}]
        measured.write_text(json.dumps(kept + rows))
        table = sorted(kept + rows, key=key)
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(report(table, backends, args.counts), encoding="utf-8")
    print("\n" + args.out.read_text())


def report(rows: list[dict], backends: list[str], counts: list[int]) -> str:
    """The table, the ratios per size and the fitted projections, as Markdown."""
    lines = [f"`ifqa retrieve --k 100`, {machine()}", "", markdown_table(rows, digits=1), ""]
    if len(backends) > 1:
        lines += [
            "Lucene / bm25s wall time (the default's lead; Lucene 10's beside Lucene 9.9's), Lucene 9.9 / Lucene 10 "
            "(Lucene 10's lead), and bm25s retrieve peak / index on disk:",
            "",
        ]
        for count in counts:
            for n in sorted({r["passages"] for r in rows if r["questions"] == count}):
                runs = {r["backend"]: r for r in rows if r["questions"] == count and r["passages"] == n}
                ours = runs.get("bm25s")
                if ours is None or len(runs) < 2:
                    continue
                said = [f"{b} {runs[b]['retrieve s'] / ours['retrieve s']:.2f}x" for b in backends[1:] if b in runs]
                if {"pyserini", "pyserini-10"} <= set(runs):
                    said.append(f"9.9 / 10: {runs['pyserini']['retrieve s'] / runs['pyserini-10']['retrieve s']:.2f}x")
                said.append(f"{ours['retrieve peak MB'] / ours['index MB on disk']:.2f}")
                lines.append(f"- {n:,} passages, {count} questions: " + "; ".join(said))
        lines.append("")
    sizes = sorted({r["passages"] for r in rows})
    lines.append(
        f"Fits (least squares over {len(sizes)} sizes: a line; then the line through the two largest "
        "sizes, the growth at the top of the curve, which is what a projection beyond it follows where "
        "the points bend upwards) and projections:"
    )
    lines.append("")

    def projected(points: list[tuple[float, float]]) -> str:
        fits = {"all sizes": fit(points)}
        if len(points) > 2:  # with two, both lines are the same
            fits["two largest"] = fit(sorted(points)[-2:])
        return "; ".join(
            f"{name}: {a:,.1f} + {b * 1e6:,.2f} per million passages -> "
            + ", ".join(f"{total / 1e6:g}M: {a + b * total:,.0f}" for total in PROJECT)
            for name, (a, b) in fits.items()
        )

    for backend in backends:
        for count in counts:
            points = [(r["passages"], r) for r in rows if r["backend"] == backend and r["questions"] == count]
            for column in ("retrieve s", "retrieve peak MB") if points else ():
                lines.append(
                    f"- {backend}, {count} questions, {column}: " + projected([(n, r[column]) for n, r in points])
                )
        for column in ("index MB on disk", "build s", "build peak MB"):
            points = {r["passages"]: r[column] for r in rows if r["backend"] == backend}
            if points:
                lines.append(f"- {backend}, {column}: " + projected(sorted(points.items())))
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    main()
