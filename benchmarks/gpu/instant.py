"""``python benchmarks/gpu/instant.py ARGS``: ``ifqa ARGS`` with the models replaced by ones that return
at once (zeros of the right shape), so what the command costs the host (reading, tokenizing, batching,
writing) is all that is left to measure, on any CPU. The models still load: start-up is unchanged.
Only the suite's host mode (``gpu_suite.py --host``) runs it.

With ``IFQA_INSTANT_MARKS=FILE`` each model call's time and rows are written to FILE as the command ends:
the rate between the first call and the last is the feed's steady rate, start-up left out by itself (not a
difference of two commands' start-ups, which vary by half a second on a shared machine)."""

from __future__ import annotations

import atexit
import json
import os
import sys
import time
from pathlib import Path

MARKS_ENV = "IFQA_INSTANT_MARKS"


def install() -> None:
    """Each model's forward call answers at once: the bi-encoders' vectors and the cross-encoder's logits."""
    import torch

    from ifqa.retrieval import encoders, rerank

    marks: list[tuple[float, int]] = []  # (perf_counter seconds, rows) of each call
    if os.environ.get(MARKS_ENV):
        atexit.register(lambda path=os.environ[MARKS_ENV]: Path(path).write_text(json.dumps(marks)))

    def rows(features: dict) -> int:
        marks.append((time.perf_counter(), len(features["input_ids"])))
        return marks[-1][1]

    def vectors(self, features: dict):
        return torch.zeros(rows(features), self.dim)

    for encoder in (encoders.SentenceEncoder, encoders.DPREncoder):
        encoder.passage_vectors = encoder.query_vectors = vectors
    rerank.CrossEncoderReranker._logits = lambda self, features: torch.zeros(rows(features))


def steady_rate(marks_file: Path) -> float:
    """Rows a second from the first model call to the last (the rows of every call after the first)."""
    marks = json.loads(Path(marks_file).read_text())
    if len(marks) < 2 or marks[-1][0] <= marks[0][0]:
        raise RuntimeError(f"{marks_file}: {len(marks)} model calls, too few to time the feed")
    return sum(rows for _, rows in marks[1:]) / (marks[-1][0] - marks[0][0])


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    install()
    from ifqa.cli import run

    sys.argv[0] = "ifqa"
    run()  # as the `ifqa` program runs, so also as it ends: without tearing its modules down one by one
