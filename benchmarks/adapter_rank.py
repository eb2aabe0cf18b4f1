"""What a trained reader's LoRA rank buys: its adapter cut to lower ranks by SVD (each layer's update
B A, the best rank-r approximation of it), each cut read on llama.cpp beside the full adapter on the same
run, with EM and the agreement of their answers. Issue #82 asks for the smallest rank within 1 EM point
of the best; the cuts are a measurement of the trained adapter, not adapters trained at that rank.

    python benchmarks/adapter_rank.py --reader DIR --run RUN --setting supervised --split dev --ranks 8,4

Writes the cut readers beside ``--work`` (benchmarks/.work/adapter-rank) and prints a Markdown table.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import WORK, Parser, answers, evaluation, machine  # noqa: E402

from ifqa.llm import gguf_forms  # noqa: E402
from ifqa.llm.local_models import whole_digest  # noqa: E402
from ifqa.llm.trained import trained_reader  # noqa: E402


def layer_names(blocks: int) -> list[str]:
    """The transformers names of a llama model's adaptable linear layers."""
    parts = ["self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj"]
    parts += ["mlp.gate_proj", "mlp.up_proj", "mlp.down_proj"]
    return [f"model.layers.{i}.{p}" for i in range(blocks) for p in parts]


def cut(reader_dir: Path, rank: int, target: Path) -> Path:
    """``reader_dir``'s reader with each layer's update B A cut to ``rank`` by SVD (alpha = rank: scale 1)."""
    import gguf
    import numpy as np

    reader = trained_reader(str(reader_dir))
    base, adapter = reader.checked_adapter()
    factors = {t.name: np.asarray(t.data, dtype=np.float32) for t in gguf.GGUFReader(str(adapter)).tensors}
    alpha = float(gguf.GGUFReader(str(adapter)).fields["adapter.lora.alpha"].contents())
    base_reader = gguf.GGUFReader(str(base))
    blocks = int(base_reader.fields["llama.block_count"].contents())
    heads = (int(base_reader.fields["llama.attention.head_count"].contents()),
             int(base_reader.fields["llama.attention.head_count_kv"].contents()))  # fmt: skip
    names = gguf.get_tensor_name_map(gguf.MODEL_ARCH.LLAMA, blocks)
    pairs = {}
    for module in layer_names(blocks):
        name = f"{names.get_name(module)}.weight"
        if f"{name}.lora_a" not in factors:
            continue
        a, b = factors[f"{name}.lora_a"], factors[f"{name}.lora_b"]
        b = gguf_forms._reordered(name, b, "llama", heads, back=True)  # transformers' row order, as written from
        u, s, vt = np.linalg.svd((alpha / a.shape[0]) * (b @ a), full_matrices=False)
        pairs[module] = (vt[:rank], u[:, :rank] * s[:rank])
    if target.exists():
        shutil.rmtree(target)
    target.mkdir(parents=True)
    gguf_forms.write_adapter(target / gguf_forms.ADAPTER, base, reader.card["base_digest"], float(rank), pairs)
    card = dict(reader.card)
    card["adapter"] = {"file": gguf_forms.ADAPTER, "digest": whole_digest(target / gguf_forms.ADAPTER), "alpha": rank}
    card["lora"] = {**(card.get("lora") or {}), "rank": rank, "cut_from": str(reader_dir), "cut_by": "SVD"}
    (target / "ifqa_card.json").write_text(json.dumps(card, indent=2))
    return target


def read(reader: Path, args, out: Path) -> tuple[float, dict]:
    started = time.perf_counter()
    command = [sys.executable, "-m", "ifqa", "read", "llm", "--model", str(reader), "--run", args.run]
    command += ["--setting", args.setting, "--split", args.split, "-o", str(out), "--no-progress"]
    subprocess.run(command, check=True, capture_output=True, text=True)
    seconds = time.perf_counter() - started
    return seconds, evaluation(out, args.setting, args.split)


def main() -> None:
    parser = Parser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reader", required=True, help="A trained reader's folder (adapter.gguf and its card).")
    parser.add_argument("--run", required=True, input_file=True, help="The run to read (its passages).")
    parser.add_argument("--setting", default="supervised")
    parser.add_argument("--split", default="dev")
    parser.add_argument("--ranks", default="8,4", help="Ranks to cut the adapter to, comma-separated.")
    parser.add_argument("--work", type=Path, default=WORK / "adapter-rank")
    args = parser.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    full = Path(args.reader)
    rank = trained_reader(str(full)).card["recipe"]["lora_rank"]
    rows = [(f"rank {rank} (trained)", full)]
    rows += [(f"rank {r} (SVD cut)", cut(full, r, args.work / f"rank-{r}")) for r in map(int, args.ranks.split(","))]
    print(
        f"machine: {machine()}\n\n| adapter | MB | EM | F1 | answers equal to rank {rank}'s | seconds |\n|---|---|---|---|---|---|"
    )
    reference = None
    for label, folder in rows:
        out = args.work / f"{folder.name}.jsonl"
        seconds, report = read(folder, args, out)
        got = answers(out)
        reference = reference or got
        same = sum(got[q] == reference[q] for q in reference) / len(reference)
        size = (folder / gguf_forms.ADAPTER).stat().st_size / 1e6
        print(f"| {label} | {size:.1f} | {report['em']:.2f} | {report['f1']:.2f} | {100 * same:.1f}% | {seconds:.0f} |")


if __name__ == "__main__":
    main()
