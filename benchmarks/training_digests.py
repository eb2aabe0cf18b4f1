"""Digests of what training makes (issue #85: "bit-identical weights before and after"): the tests' tiny FiD,
LLM reader (full and LoRA), reranker and retriever, each trained a few steps on the CPU in fp32, their saved
weights and per-step losses hashed. Run on two checkouts, the same digests mean a refactor changed no model.

    python benchmarks/training_digests.py                      # this tree
    python benchmarks/training_digests.py --tree DIR           # and another checkout (a git worktree of an older commit)

The tiny models, run files and training groups are built once, by this tree, so both checkouts train on the
same bytes; each checkout trains in its own process with its ``ifqa`` first on the path.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import ROOT, Parser  # noqa: E402

TRAIN = r"""
import hashlib, json, sys
from pathlib import Path
tree, work = Path(sys.argv[1]), Path(sys.argv[2])
sys.path.insert(0, str(tree))  # ahead of the working directory, which -c puts before PYTHONPATH
from safetensors.torch import load_file
from ifqa.registry import TRAINABLE
from ifqa.training import fid, llm
from ifqa.training.data import TrainingGroup
from ifqa.training.jobs import train_on_loop
from ifqa.training.loop import Invocation
from ifqa.training.recipes import FiDRecipe, LLMRecipe, RerankerRecipe, RetrieverRecipe

def weights(folder):
    digest = hashlib.sha256()
    for path in sorted(folder.rglob("*")):
        if path.suffix == ".safetensors":
            tensors = load_file(str(path))
            for name in sorted(tensors):
                digest.update(name.encode() + tensors[name].float().numpy().tobytes())
        elif path.suffix in (".bin", ".gguf", ".npy", ".pt"):
            digest.update(path.read_bytes())
    return digest.hexdigest()[:16]

def losses(record):
    return hashlib.sha256(json.dumps([e["loss"] for e in record["log"]]).encode()).hexdigest()[:16]

out, run, dev = work / tree.name, work / "train.jsonl", work / "dev.jsonl"
found = {}
recipe = FiDRecipe(model=str(work / "t5"), steps=4, lr=1e-3, batch_size=2, warmup_steps=1, n_context=2,
                   text_maxlength=32, answer_maxlength=6, eval_every=2, eval_batch_size=2, precision="fp32")
record = fid.train(run, dev, out / "fid", recipe, "cpu", progress=False)
found["fid"] = [weights(out / "fid" / "last"), weights(out / "fid" / "best"), losses(record), record["best_em"]]
for name, extra in (("llm-full", {}), ("llm-lora", {"lora_rank": 4})):
    recipe = LLMRecipe(model=str(work / "llama"), steps=4, batch_size=2, lr=1e-3, passages=2, eval_batch_size=2,
                       eval_every=2, precision="fp32", **extra)
    record = llm.train(run, dev, out / name, recipe, "cpu", progress=False)
    found[name] = [weights(out / name / "last"), losses(record), record["best_em"]]
groups = [TrainingGroup(**g) for g in json.loads((work / "groups.json").read_text())]
bert = str(work / "bert")
for name, recipe in (
    ("reranker", RerankerRecipe(model=bert, questions_per_step=2, group_size=4, other_gold=1, index="x")),
    ("retriever", RetrieverRecipe(model=bert, questions_per_step=4, index="x")),
):
    record = train_on_loop(TRAINABLE.get(name), groups, out / name, recipe, Invocation("cpu", False))
    found[name] = [weights(out / name / "model"), losses(record)]
print(json.dumps(found))
"""

TOPICS = ["cats", "dogs", "rivers", "kings", "bridges", "stars", "moons", "trees"]


def build_inputs(work: Path) -> None:
    """The tiny models, run files and groups every checkout trains on (this tree's test helpers build them)."""
    sys.path.insert(0, str(ROOT))
    from tests.readers.tiny_models import tiny_llama, tiny_t5
    from tests.training.test_llm import DEV, TOY, write_run
    from tests.training.tiny import tiny_bert

    tiny_t5(work / "t5")
    tiny_llama(work / "llama", chat=True)
    tiny_bert(work / "bert")
    write_run(work / "train.jsonl", TOY)
    write_run(work / "dev.jsonl", DEV, name="toy:dev")
    groups = [
        {
            "qid": str(i),
            "question": f"question {i} about {topic}",
            "positives": [f"gold passage {i} on {topic} and more"],
            "negatives": [f"negative {j} {topic} text" for j in range(6)],
            "other_gold": [f"other gold {i + 1}"],
        }
        for i, topic in enumerate(TOPICS)
    ]
    (work / "groups.json").write_text(json.dumps(groups))


def digests(tree: Path, work: Path) -> dict:
    env = {**os.environ, "IFQA_FEED_WORKERS": "0", "PYTHONPATH": str(tree)}
    result = subprocess.run(
        [sys.executable, "-c", TRAIN, str(tree), str(work)], capture_output=True, text=True, env=env
    )
    if result.returncode != 0:
        raise SystemExit(f"training_digests: {tree} did not train:\n{result.stderr[-2000:]}")
    return json.loads(result.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = Parser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tree", help="another checkout to train with the same inputs and compare")
    args = parser.parse_args()
    trees = [ROOT] + ([Path(args.tree).resolve()] if args.tree else [])
    for tree in trees:
        if not (tree / "ifqa" / "__init__.py").is_file():
            parser.exit(1, f"training_digests: --tree {tree}: no ifqa package there\n")
    with tempfile.TemporaryDirectory() as work:
        build_inputs(Path(work))
        found = {str(tree): digests(tree, Path(work)) for tree in trees}
    for tree, rows in found.items():
        print(tree)
        for kind, row in rows.items():
            print(f"  {kind:<10} " + "  ".join(str(v) for v in row))
    if len(trees) == 2:
        same = [kind for kind in found[str(trees[0])] if found[str(trees[0])][kind] == found[str(trees[1])].get(kind)]
        print(f"identical: {len(same)} of {len(found[str(trees[0])])} kinds ({', '.join(same) or 'none'})")


if __name__ == "__main__":
    main()
