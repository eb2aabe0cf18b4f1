"""``python benchmarks/gpu/instant.py ARGS``: ``ifqa ARGS`` with the models replaced by ones that return
at once (zeros of the right shape), so what the command costs the host (reading, tokenizing, batching,
writing) is all that is left to measure, on any CPU. The models still load: start-up is unchanged.
Only the suite's host mode (``gpu_suite.py --host``) runs it."""

from __future__ import annotations

import sys
from pathlib import Path


def install() -> None:
    """Each model's forward call answers at once: the bi-encoders' vectors and the cross-encoder's logits."""
    import torch

    from ifqa.retrieval import encoders, rerank

    def rows(features: dict) -> int:
        return len(features["input_ids"])

    def vectors(self, features: dict):
        return torch.zeros(rows(features), self.dim)

    for encoder in (encoders.SentenceEncoder, encoders.DPREncoder):
        encoder.passage_vectors = encoder.query_vectors = vectors
    rerank.CrossEncoderReranker._logits = lambda self, features: torch.zeros(rows(features))


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    install()
    from ifqa.cli import run

    sys.argv[0] = "ifqa"
    run()  # as the `ifqa` program runs, so also as it ends: without tearing its modules down one by one
