"""FiD training throughput and peak GPU memory: t5-base, 20 passages of 250 tokens, bf16,
with and without gradient checkpointing (benchmarks/gpu_suite.py also runs it compiled). The model is built from t5-base's configuration with
random weights (same cost as the pretrained one), so no download is needed.

    python benchmarks/fid_throughput.py [--batch-size 1] [--steps 20]

Needs CUDA; prints a note and exits 0 without it.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from common import Parser  # noqa: E402

T5_BASE = dict(
    vocab_size=32128,
    d_model=768,
    d_kv=64,
    d_ff=3072,
    num_layers=12,
    num_decoder_layers=12,
    num_heads=12,
    dropout_rate=0.1,
    decoder_start_token_id=0,
    pad_token_id=0,
    eos_token_id=1,
)


def measure(
    checkpointing: bool,
    batch: int,
    steps: int,
    passages: int,
    length: int,
    device: str = "cuda",
    folder: Path | None = None,
    compiled: bool = False,
) -> dict:
    """Training examples/s of the model alone, as `ifqa train fid` steps it: bf16 autocast and fused
    AdamW on CUDA, ``compiled`` under torch.compile (labels of one shape, as ifqa pads them)."""
    import torch  # here, not at the top: --help answers without loading torch
    from transformers import T5Config

    from ifqa.readers.fid.model import FiDT5

    torch.manual_seed(0)
    model = (FiDT5.from_pretrained(str(folder)) if folder else FiDT5(T5Config(**T5_BASE))).to(device).train()
    if checkpointing:
        model.gradient_checkpointing_enable()
        model.config.use_cache = False
    cuda = device.startswith("cuda")
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=cuda)
    if compiled:  # a fresh start: graphs of an earlier batch size would turn this one's shapes dynamic
        torch._dynamo.reset()
    forward = torch.compile(model) if compiled else model
    vocab = model.config.vocab_size
    ids = torch.randint(2, vocab - 100, (batch, passages, length), device=device)
    mask = torch.ones_like(ids)
    labels = torch.randint(2, vocab - 100, (batch, 20), device=device)
    if cuda:
        torch.cuda.reset_peak_memory_stats()
    for step in range(steps + 3):
        if step == 3:
            if cuda:
                torch.cuda.synchronize()
            started = time.time()
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=cuda):
            loss = forward(input_ids=ids, attention_mask=mask, labels=labels).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
    if cuda:
        torch.cuda.synchronize()
    seconds = time.time() - started
    result = {
        "checkpointing": checkpointing,
        "batch": batch,
        "examples/s": batch * steps / seconds,
        "peak GiB": torch.cuda.max_memory_allocated() / 2**30 if cuda else 0.0,
    }
    del model, optimizer, forward
    if cuda:
        torch.cuda.empty_cache()
    return result


def main() -> None:
    parser = Parser()
    parser.add_argument("--batch-size", type=int, nargs="+", default=[1, 4, 8])
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--passages", type=int, default=20)
    parser.add_argument("--length", type=int, default=250)
    args = parser.parse_args()
    import torch

    if not torch.cuda.is_available():
        print("no CUDA device: this benchmark needs a GPU (figures pending)")
        return
    print(
        f"GPU: {torch.cuda.get_device_name(0)}; torch {torch.__version__}; t5-base, {args.passages} passages x "
        f"{args.length} tokens, bf16 autocast, AdamW\n"
    )
    print("| gradient checkpointing | batch | examples/s | peak GiB |")
    print("|---|---|---|---|")
    for batch in args.batch_size:
        for checkpointing in (False, True):
            try:
                r = measure(checkpointing, batch, args.steps, args.passages, args.length)
                print(f"| {'yes' if checkpointing else 'no'} | {batch} | {r['examples/s']:.2f} | {r['peak GiB']:.1f} |")
            except torch.cuda.OutOfMemoryError:
                print(f"| {'yes' if checkpointing else 'no'} | {batch} | out of memory | |")
                torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
