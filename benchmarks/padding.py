"""How much of what a dense encoder computes is padding, with a chunk's batches planned by its passages'
characters (what ``ifqa index dense`` did before) beside planned by their token counts (what it does now:
``BatchTokens.planned``), and what that costs in time on this CPU, in one run.

- Padding: the share of the tokens a batch computes (rows x its longest) that are padding, at 128, 256
  and 512 tokens, in batches of 64 (the CPU's default) and 512 (a GPU's), over chunks of 4,096 passages
  (``dense.CHUNK``). A text's characters say little of its word pieces (numbers, names and rare words
  split into many), so batches planned by characters pad to their longest outlier.
- A token budget (``--max-batch-tokens``, the batch × the length limit): its padding and its model calls
  beside the fixed batches'.
- At a GPU's batch of 512, the padding left by chunk size (``--chunk-size``: a chunk is what its batches are
  planned over) beside the whole collection planned at once: what unpadded attention could still save.
- Time: the default encoder (all-MiniLM-L6-v2, fp32) over ``--passages`` passages at ``--max-length``
  tokens in batches of 64 (and within a budget of 64 × the length), the plans alternated ``--repeats``
  times, and the largest difference between their vectors (``--passages 0``: not timed).

    python benchmarks/padding.py [--corpus FILE] [--passages 2048] [--max-length 256] [--repeats 3]
                                 [--questions FILE]

``--questions`` (a JSON list or JSON lines of objects with a ``question``, IfQA's own files among them) adds
the same for questions: their padding planned each way, and ``encode_queries`` timed each way at batch 64.

The corpus defaults to the demo collection shipped in the package (4,151 real Wikipedia passages); the
figures in docs/benchmarks.md are over mini-wiki (76,710 passages, ``../shared``).
"""

from __future__ import annotations

import gzip
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import Parser, machine, markdown_table, read_questions  # noqa: E402

from ifqa.datasets.demo import packaged_passages  # noqa: E402
from ifqa.retrieval import DEFAULT_ENCODER  # noqa: E402
from ifqa.retrieval.batching import plan  # noqa: E402
from ifqa.retrieval.dense import CHUNK  # noqa: E402
from ifqa.retrieval.encoders import SentenceEncoder, _BatchedEncoder, passage_text  # noqa: E402


def read_passages(corpus: Path | None) -> list[dict]:
    opened = (
        gzip.open(packaged_passages(), "rt", encoding="utf-8") if corpus is None else open(corpus, encoding="utf-8")
    )
    with opened as handle:
        return [json.loads(line) for line in handle if line.strip()]


def padding_share(lengths, proxy, batch_size: int | None, max_tokens: int | None = None) -> float:
    """Padding's share of the tokens computed, each chunk's batches planned by ``proxy``."""
    return plan_stats(lengths, proxy, batch_size, max_tokens)[0]


def plan_stats(
    lengths, proxy, batch_size: int | None, max_tokens: int | None = None, size: int = CHUNK
) -> tuple[float, int]:
    """(padding's share of the tokens computed, the model calls), each chunk of ``size`` passages planned by
    ``proxy`` (in batches of ``batch_size``, or within a budget of ``max_tokens``: ``batching.plan``)."""
    real = padded = calls = 0
    for start in range(0, len(lengths), size):
        chunk, keys = lengths[start : start + size], proxy[start : start + size]
        for batch in plan(keys, batch_size, max_tokens):
            longest = max(chunk[i] for i in batch)
            real += sum(chunk[i] for i in batch)
            padded += longest * len(batch)
            calls += 1
    return 100.0 * (1 - real / padded), calls


def token_counts(passages: list[dict], tokenizer) -> list[int]:
    """Each passage's token count as the encoder reads it, uncut (the tables cut it at each length limit)."""
    return [len(ids) for ids in tokenizer([passage_text(p) for p in passages], add_special_tokens=True)["input_ids"]]


def padding_rows(passages: list[dict], full: list[int]) -> list[dict]:
    characters = [len(p["title"]) + len(p["text"]) for p in passages]
    rows = []
    for max_length in (128, 256, 512):
        tokens = [min(n, max_length) for n in full]
        for batch_size in (64, 512):
            fixed, calls = plan_stats(tokens, tokens, batch_size)
            budgeted, budget_calls = plan_stats(tokens, tokens, None, batch_size * max_length)
            rows.append(
                {
                    "tokens": max_length,
                    "batch": batch_size,
                    "padding, planned by characters (%)": padding_share(tokens, characters, batch_size),
                    "padding, planned by tokens (%)": fixed,
                    "model calls": calls,
                    "budget of batch × tokens: padding (%)": budgeted,
                    "its model calls": budget_calls,
                }
            )
    return rows


def chunk_rows(full: list[int], batch_size: int = 512) -> list[dict]:
    """Padding at ``batch_size`` by chunk size, planned by tokens, beside the whole collection planned at once."""
    sizes = [size for size in (CHUNK, 4 * CHUNK, 8 * CHUNK, 16 * CHUNK) if size < len(full)] + [len(full)]
    rows = []
    for max_length in (128, 256, 512):
        tokens = [min(n, max_length) for n in full]
        row = {"tokens": max_length, "batch": batch_size}
        for size in sizes:
            name = "whole collection" if size == len(full) else f"chunks of {size:,}"
            row[f"{name} (%)"] = plan_stats(tokens, tokens, batch_size, size=size)[0]
        rows.append(row)
    return rows


def timing(passages: list[dict], max_length: int, repeats: int) -> tuple[dict, float]:
    """Seconds (median) to encode ``passages`` with each plan, alternated; the largest vector difference."""
    import numpy as np

    encoder = SentenceEncoder(DEFAULT_ENCODER, device="cpu", max_length=max_length, precision="fp32")
    characters = [len(p["title"]) + len(p["text"]) for p in passages]  # what index dense planned by before
    plans = {
        "characters": lambda: [(b, encoder.passage_inputs([passages[i] for i in b])) for b in plan(characters, 64)]
    }
    plans["tokens"] = lambda: encoder.passage_batches(passages, 64)
    plans["budget"] = lambda: encoder.passage_batches(passages, None, 64 * max_length)  # --max-batch-tokens
    seconds, vectors = {name: [] for name in plans}, {}
    for _ in range(repeats):
        for name, batches in plans.items():
            started = time.perf_counter()
            made = [(positions, encoder.passage_vectors(features)) for positions, features in batches()]
            seconds[name].append(time.perf_counter() - started)
            out = np.empty((len(passages), encoder.dim), np.float32)
            for positions, block in made:
                out[positions] = block.numpy()
            vectors[name] = out
    difference = max(float(np.abs(vectors["characters"] - vectors[name]).max()) for name in ("tokens", "budget"))
    return {name: statistics.median(values) for name, values in seconds.items()}, difference


def questions_rows(questions: list[str], encoder) -> tuple[list[dict], dict, float]:
    """Padding of question batches planned by characters and by tokens at 64 and 512, and encode_queries
    (batch 64, fp32) with each plan, alternated three times: (rows, median seconds, largest difference)."""
    import numpy as np

    tokens = encoder._fast.counts(questions)
    characters = [len(q) for q in questions]
    rows = [
        {
            "batch": batch_size,
            "padding, planned by characters (%)": padding_share(tokens, characters, batch_size),
            "padding, planned by tokens (%)": padding_share(tokens, tokens, batch_size),
        }
        for batch_size in (64, 512)
    ]
    ways = {
        "characters": lambda: _BatchedEncoder._run(
            encoder, questions, characters, encoder.query_inputs, encoder.query_vectors, 64
        ),
        "tokens": lambda: encoder.encode_queries(questions, 64),
    }
    seconds, vectors = {name: [] for name in ways}, {}
    for _ in range(3):
        for name, way in ways.items():
            started = time.perf_counter()
            vectors[name] = way()
            seconds[name].append(time.perf_counter() - started)
    difference = float(np.abs(vectors["characters"] - vectors["tokens"]).max())
    return rows, {name: statistics.median(values) for name, values in seconds.items()}, difference


def main() -> None:
    parser = Parser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", input_file=True, help="a passage file (default: the demo collection)")
    parser.add_argument("--passages", type=int, default=2048, at_least=0, help="passages timed (0: no timing)")
    parser.add_argument("--max-length", type=int, default=256)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--questions", input_file=True, help="questions (JSON list or lines with 'question')")
    args = parser.parse_args()

    passages = read_passages(args.corpus)
    encoder = SentenceEncoder(DEFAULT_ENCODER, device="cpu")
    print(f"machine: {machine()}; {len(passages):,} passages ({args.corpus or 'the demo collection'})\n")
    full = token_counts(passages, encoder.model.tokenizer)  # tokenized once for both tables
    print(markdown_table(padding_rows(passages, full)))
    print("\npadding at a GPU's batch of 512 by chunk size (--chunk-size), planned by tokens:\n")
    print(markdown_table(chunk_rows(full)))
    if args.passages:
        report_timing(passages, args)
    if args.questions:
        report_questions(args.questions)


def report_timing(passages: list[dict], args) -> None:
    seconds, difference = timing(passages[: args.passages], args.max_length, args.repeats)
    n = min(args.passages, len(passages))
    print(
        f"\nencoding {n:,} passages at {args.max_length} tokens, batches of 64, fp32 (median of {args.repeats}): "
        f"planned by characters {seconds['characters']:.2f} s, by tokens {seconds['tokens']:.2f} s "
        f"({seconds['characters'] / seconds['tokens']:.2f}x), by tokens within a budget of 64 x {args.max_length} "
        f"tokens (--max-batch-tokens) {seconds['budget']:.2f} s; vectors differ by at most {difference:.1e}"
    )


def report_questions(path) -> None:
    questions = read_questions(path)
    encoder = SentenceEncoder(DEFAULT_ENCODER, device="cpu", precision="fp32")
    rows, seconds, difference = questions_rows(questions, encoder)
    print(f"\n{len(questions):,} questions ({path}), 128 tokens at most:\n")
    print(markdown_table(rows))
    print(
        f"\nencode_queries, batches of 64, fp32 (median of 3): planned by characters {seconds['characters']:.2f} s, "
        f"by tokens {seconds['tokens']:.2f} s ({seconds['characters'] / seconds['tokens']:.2f}x); vectors differ "
        f"by at most {difference:.1e}"
    )


if __name__ == "__main__":
    main()
