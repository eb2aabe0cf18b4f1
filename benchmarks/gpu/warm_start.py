"""What beginning CUDA early, in a thread, would save a model command's start-up, in fresh processes:

    python benchmarks/gpu/warm_start.py [--runs 3] [--out FILE]

Each run is a new interpreter that does what a model command does before its first batch: import
torch, then transformers' model classes, build a model of all-MiniLM-L6-v2's shape (random weights),
move it to the GPU in fp16 and run one batch of 64 x 128 tokens. ``cold`` lets torch begin CUDA on that
first move, as ifqa does; ``warm`` makes the CUDA context in a thread right after torch's import (so
it overlaps the model classes' import); ``warm+cublas`` also runs one fp16 matrix product there (cuBLAS
loaded early too). The H200 (2026-11-28, docs/benchmarks.md): no gain past the runs' spread (the
model classes' import is the 7-8 s; CUDA's own start is a few tenths), so ifqa does not do it.
Runs alternate; each reports seconds from the process's start to each part, and the medians are
printed (and written to ``--out`` as JSON). Without CUDA it says so and exits 0."""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from common import ROOT, Parser  # noqa: E402

#: one fresh process; its stamps are phases.py's (seconds since the process began)
CHILD = r"""
import json, sys
sys.path.insert(0, "benchmarks/gpu")
from phases import STAMPS, mark
import torch
mark("torch imported")
def begin():
    torch.empty(1, device="cuda")
    if sys.argv[1] == "warm+cublas":
        a = torch.ones(64, 64, device="cuda", dtype=torch.half)
        (a @ a).sum().item()
if sys.argv[1] != "cold":
    import threading
    threading.Thread(target=begin, daemon=True).start()
from transformers import AutoModel, BertConfig
mark("model classes imported")
config = BertConfig(hidden_size=384, num_hidden_layers=6, num_attention_heads=12, intermediate_size=1536)
model = AutoModel.from_config(config).half().eval()
mark("model built")
model.to("cuda")
mark("model on the GPU")
with torch.inference_mode():
    model(input_ids=torch.ones(64, 128, dtype=torch.long, device="cuda"))
torch.cuda.synchronize()
mark("first batch run")
print(json.dumps(STAMPS))
"""


def run(mode: str) -> dict[str, float]:
    done = subprocess.run([sys.executable, "-c", CHILD, mode], capture_output=True, text=True, cwd=ROOT, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = Parser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3, help="fresh processes per mode (alternating)")
    parser.add_argument("--out", type=Path, help="write the medians here as JSON")
    args = parser.parse_args()
    import torch

    if not torch.cuda.is_available():
        print("warm_start: no CUDA device here; nothing measured")
        return
    runs: dict[str, list[dict]] = {"cold": [], "warm": [], "warm+cublas": []}
    for _ in range(args.runs):
        for mode in runs:
            runs[mode].append(run(mode))
    medians = {
        mode: {part: statistics.median(r[part] for r in rows) for part in rows[0]} for mode, rows in runs.items()
    }
    for mode, parts in medians.items():
        print(f"{mode}: " + ", ".join(f"{part} {at:.2f} s" for part, at in parts.items()))
    saved = medians["cold"]["first batch run"] - medians["warm"]["first batch run"]
    print(f"warm saves {saved:.2f} s of {medians['cold']['first batch run']:.2f} s (medians of {args.runs} runs each)")
    if args.out:
        args.out.write_text(json.dumps({"medians": medians, "runs": runs}, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
