"""Helpers for the benchmark scripts: timing a command with its peak memory, the shared data paths."""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("IFQA_SHARED_DATA", ROOT.parent / "shared" / "data"))
WORK = ROOT / "benchmarks" / ".work"


def free_port() -> int:
    """A port on 127.0.0.1 nothing listens on now (for a server a benchmark starts)."""
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def machine() -> str:
    return f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"


def timed(command: list[str], **kwargs) -> tuple[float, float, subprocess.CompletedProcess]:
    """Wall seconds and peak resident memory (MB, largest process of the command) of one command.

    The returned process also carries ``cpu_seconds``: user + system time of the command and every
    process it waited for (its workers), the measure of work per core.
    """
    script = (
        "import resource, subprocess, sys, time; t = time.time(); "
        "p = subprocess.run(sys.argv[1:], capture_output=True, text=True); "
        "u = resource.getrusage(resource.RUSAGE_CHILDREN); "
        "print(time.time() - t, u.ru_maxrss / 1024, p.returncode, u.ru_utime + u.ru_stime); "
        "sys.stderr.write(p.stderr[-2000:]); sys.stdout.write(p.stdout)"
    )
    result = subprocess.run([sys.executable, "-c", script, *command], capture_output=True, text=True, **kwargs)
    first, _, rest = result.stdout.partition("\n")
    seconds, peak, code, cpu = first.split()
    if int(code) != 0:
        raise SystemExit(f"{' '.join(command)} failed:\n{result.stderr}")
    result.stdout = rest
    result.cpu_seconds = float(cpu)
    return float(seconds), float(peak), result


def answers(path: Path) -> dict[str, str]:
    """A predictions file's answers by question (``ifqa read``'s output)."""
    with Path(path).open(encoding="utf-8") as handle:
        return {record["qid"]: record["prediction"] for record in map(json.loads, handle)}


def evaluation(path: Path, setting: str, split: str) -> dict:
    """``ifqa evaluate --json`` of a predictions file: EM, F1 and the rest, as the command reports them."""
    command = ifqa("evaluate", "--predictions", path, "--json", "--setting", setting, "--split", split)
    return json.loads(subprocess.run(command, check=True, capture_output=True, text=True).stdout)


def markdown_table(rows: list[dict], digits: int = 1, skip: tuple[str, ...] = ()) -> str:
    """A Markdown table of dict rows (keys of the first row, minus ``skip``); floats to ``digits``."""
    keys = [k for k in rows[0] if k not in skip]
    lines = ["| " + " | ".join(keys) + " |", "|" + "---|" * len(keys)]
    for row in rows:
        lines.append(
            "| "
            + " | ".join(f"{row[k]:,.{digits}f}" if isinstance(row[k], float) else str(row[k]) for k in keys)
            + " |"
        )
    return "\n".join(lines)


#: the one question the start-up and batch benchmarks rerank their passages for
QUESTION = {"question": "If the river dried up, what would the bridge cross?", "answers": ["a valley"]}


def minilm_models(work: Path) -> tuple[str, str]:
    """The packaged all-MiniLM-L6-v2 (the default encoder), and a cross-encoder of its shape saved by the
    library in ``work`` (what ``ifqa train reranker`` writes: its speed is its shape's)."""
    from sentence_transformers import CrossEncoder

    from ifqa.retrieval.encoders import resolve

    encoder = resolve("sentence-transformers/all-MiniLM-L6-v2")
    cross = work / "cross-encoder"
    if not cross.exists():
        CrossEncoder(encoder, num_labels=1, max_length=256).save(str(cross))
    return encoder, str(cross)


def one_question_run(work: Path, passages: list[dict]) -> tuple[Path, Path, Path]:
    """``passages`` (title and text) as a collection, a run of ``QUESTION`` over all of them and its question
    file, in ``work``: what ``ifqa index dense`` and ``ifqa rerank`` read in these benchmarks."""
    corpus, run, questions = work / "passages.jsonl", work / "run.jsonl", work / "questions.jsonl"
    kept = [{"id": str(i), "title": p.get("title", ""), "text": p["text"]} for i, p in enumerate(passages)]
    corpus.write_text("".join(json.dumps(p) + "\n" for p in kept))
    questions.write_text(json.dumps({"idx": "1", **QUESTION}) + "\n")
    run.write_text(json.dumps({"qid": "1", **QUESTION, "ctxs": [{**p, "score": 1.0} for p in kept]}) + "\n")
    return corpus, run, questions


def read_questions(path: Path) -> list[str]:
    """The questions of a JSON list or JSON lines of objects with a ``question`` (IfQA's own files among them)."""
    text = Path(path).read_text(encoding="utf-8")
    records = (
        json.loads(text)
        if text.lstrip().startswith("[")
        else [json.loads(line) for line in text.splitlines() if line.strip()]
    )
    return [record["question"] for record in records]


def ifqa(*args: str) -> list[str]:
    return [sys.executable, "-m", "ifqa.cli", *map(str, args)]


class Parser(argparse.ArgumentParser):
    """Every script's command line: a bad flag is one line on stderr (``script: error``) and exit
    status 1, not argparse's usage block; a whole-number option (``type=int``) is at least 1 unless
    it says ``at_least=0``, so ``--rounds 0`` or ``--copies -1`` never runs a benchmark of nothing."""

    def __init__(self, **kwargs) -> None:
        kwargs.setdefault("prog", Path(sys.argv[0]).stem)
        super().__init__(**kwargs)

    def add_argument(self, *names, at_least: int | None = None, input_file: bool = False, **kwargs):
        """``input_file``: a file the script reads, which must exist (one line naming it otherwise)."""
        if kwargs.get("type") is int:
            kwargs["type"] = whole_number(1 if at_least is None else at_least)
        if input_file:
            kwargs["type"] = existing_file
        return super().add_argument(*names, **kwargs)

    def error(self, message: str):
        self.exit(1, f"{self.prog}: {' '.join(message.split())}\n")


def existing_file(text: str) -> Path:
    """An argparse type: a file that exists."""
    if not Path(text).is_file():
        raise argparse.ArgumentTypeError(f"{text}: no such file")
    return Path(text)


def whole_number(least: int):
    """An argparse type: a whole number of at least ``least``."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
        if value < least:
            raise argparse.ArgumentTypeError(f"{value} is below {least}")
        return value

    parse.__name__ = f"whole number >= {least}"
    return parse
