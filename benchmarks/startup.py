"""Start-up of the commands that run an encoder or a cross-encoder, by its parts, in one run beside the
path they took before (sentence-transformers' ``SentenceTransformer`` and ``CrossEncoder``):

- the parts, each in a fresh interpreter: the interpreter, ``import torch``, ``import transformers``, the
  model loaded (ifqa's reader of sentence-transformers folders, or the library, whose import is part of
  its load), the first batch encoded or scored;
- the whole commands: ``ifqa index dense`` over 100 passages and ``ifqa rerank`` over 100 pairs, against
  torch's and transformers' import time plus 3 s (issue #83's goal on a CPU), and beside each the model
  alone on the same 100 passages or pairs (loaded and warmed first): on a slow CPU the model's own compute
  is most of what is left, so the command less the model alone is what start-up costs.

    python benchmarks/startup.py [--repeats 3]

Each figure is the median of ``--repeats`` fresh interpreters; nothing else should run meanwhile.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import QUESTION, Parser, machine, minilm_models, one_question_run  # noqa: E402

from ifqa.retrieval.encoders import demo_texts  # noqa: E402

PARTS = """
import json, sys, time
marks = [("interpreter", time.time())]
import torch
marks.append(("torch", time.time()))
import transformers
marks.append(("transformers", time.time()))
import transformers.modeling_utils  # what loading any model imports first (torch._dynamo, torch.distributed ...)
marks.append(("transformers' modeling", time.time()))
kind, path, folder = sys.argv[1], sys.argv[2], sys.argv[3]
texts = [f"passage {i} about the river and its bridge, which would cross a valley" for i in range(32)]
if path == "sentence-transformers":
    import sentence_transformers
    if kind == "encoder":
        model = sentence_transformers.SentenceTransformer(folder, device="cpu")
        marks.append(("model loaded", time.time()))
        model.encode(texts, batch_size=32)
    else:
        model = sentence_transformers.CrossEncoder(folder, device="cpu")
        marks.append(("model loaded", time.time()))
        model.predict([("If the river dried up?", t) for t in texts], batch_size=32)
else:
    if kind == "encoder":
        from ifqa.retrieval.encoders import SentenceEncoder
        model = SentenceEncoder(folder, device="cpu")
        marks.append(("model loaded", time.time()))
        model.encode_queries(texts, batch_size=32)
    else:
        from ifqa.retrieval.rerank import CrossEncoderReranker
        model = CrossEncoderReranker(folder, device="cpu")
        marks.append(("model loaded", time.time()))
        model.score_many([("If the river dried up?", texts, [0.0] * len(texts))])
marks.append(("first batch", time.time()))
print(json.dumps(marks))
"""


def parts(kind: str, path: str, folder: str) -> dict[str, float]:
    """Seconds from the interpreter's start to each mark (the interpreter's own: until the script runs)."""
    started = time.time()
    result = subprocess.run([sys.executable, "-c", PARTS, kind, path, folder], capture_output=True, text=True)
    if result.returncode:
        raise SystemExit(result.stderr[-2000:])
    return {name: at - started for name, at in json.loads(result.stdout.splitlines()[-1])}


ALONE = """
import json, sys, time
from ifqa.retrieval.encoders import SentenceEncoder
from ifqa.retrieval import DENSE_MAX_LENGTH
from ifqa.retrieval.rerank import CrossEncoderReranker
kind, folder, question = sys.argv[1], sys.argv[2], sys.argv[3]
passages = [json.loads(line) for line in open(sys.argv[4], encoding="utf-8")]
if kind == "encoder":
    model = SentenceEncoder(folder, device="cpu", max_length=DENSE_MAX_LENGTH)  # as index dense encodes
    run = lambda items: model.encode_passages(items)
else:
    model = CrossEncoderReranker(folder, device="cpu")
    run = lambda items: model.score_many([(question, [p["text"] for p in items], [0.0] * len(items))])
run(passages[:8])
started = time.perf_counter()
run(passages)
print(time.perf_counter() - started)
"""


def model_alone(kind: str, folder: str, question: str, corpus: Path) -> float:
    """Seconds the model alone takes on the command's passages (or pairs), loaded and warmed first."""
    result = subprocess.run(
        [sys.executable, "-c", ALONE, kind, folder, question, str(corpus)], capture_output=True, text=True
    )
    if result.returncode:
        raise SystemExit(result.stderr[-2000:])
    return float(result.stdout.splitlines()[-1])


def command_seconds(args: list[str]) -> float:
    started = time.perf_counter()
    result = subprocess.run([sys.executable, "-m", "ifqa", *args], capture_output=True, text=True)
    if result.returncode:
        raise SystemExit(result.stderr[-2000:])
    return time.perf_counter() - started


def main() -> None:
    parser = Parser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        encoder, cross = minilm_models(work)
        print(f"machine: {machine()}\n")
        print("seconds from the interpreter's start to each part's end (median of fresh interpreters)\n")
        print(
            "| model | path | interpreter | torch | transformers | transformers' modeling | model loaded | first batch |"
        )
        print("|---|---|---|---|---|---|---|---|")
        imports, modeling = [], []
        for kind, folder in (("encoder", encoder), ("cross-encoder", cross)):
            for path in ("sentence-transformers", "ifqa"):
                runs = [parts(kind, path, folder) for _ in range(args.repeats)]
                median = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
                imports.append(median["transformers"])
                modeling.append(median["transformers' modeling"])
                cells = " | ".join(f"{median[k]:.2f}" for k in median)
                print(f"| {kind} | {path} | {cells} |")
        corpus, run, questions = one_question_run(work, [{"text": text} for text in demo_texts()[:100]])
        options = ["--device", "cpu", "--no-progress"]
        commands = {
            "ifqa index dense (100 passages)": [
                "index",
                "dense",
                "--corpus",
                str(corpus),
                "-o",
                str(work / "ix"),
                *options,
            ],
            "ifqa rerank (100 pairs)": [
                "rerank",
                "--run",
                str(run),
                "--model",
                cross,
                "--questions",
                str(questions),
                "-o",
                str(work / "rr.jsonl"),
                *options,
            ],
        }
        budget, loaded = statistics.median(imports) + 3, statistics.median(modeling) + 3
        print(
            f"\nwhole commands (median of {args.repeats}): goal torch + transformers imported + 3 s = {budget:.2f} s; "
            f"with transformers' modeling imported, + 3 s = {loaded:.2f} s\n"
        )
        print(
            "| command | seconds | within import + 3 s | within modeling import + 3 s "
            "| the model alone | command less the model | that within import + 3 s | that within modeling import + 3 s |"
        )
        print("|---|---|---|---|---|---|---|---|")
        kinds = {"ifqa index dense (100 passages)": ("encoder", encoder), "ifqa rerank (100 pairs)": ("cross", cross)}
        for name, command in commands.items():
            seconds = []
            for _ in range(args.repeats):
                for stale in (work / "ix", work / "rr.jsonl"):
                    subprocess.run(["rm", "-rf", str(stale)], check=True)
                seconds.append(command_seconds(command))
            value = statistics.median(seconds)
            alone = statistics.median(
                model_alone(*kinds[name], QUESTION["question"], corpus) for _ in range(args.repeats)
            )
            rest = value - alone
            print(
                f"| {name} | {value:.2f} | {'yes' if value <= budget else 'no'} | {'yes' if value <= loaded else 'no'} "
                f"| {alone:.2f} | {rest:.2f} | {'yes' if rest <= budget else 'no'} | {'yes' if rest <= loaded else 'no'} |"
            )


if __name__ == "__main__":
    main()
