"""Open-book reading with a real model at the runtime's pace: the same prompts read by ifqa (`--backend
llamacpp`: a wave generated together, the shared prefix evaluated once), straight through llama-cpp-python
one by one (its `create_chat_completion`, as a user would call it), and through `--backend hf` (transformers
dequantizes the GGUF file) with batching, in float32 and in its default precision (bfloat16 on a CPU with
AMX, else float32). ifqa reads the Q4_1 file through its F16 working copy
by default (``--gguf-weights auto``) and as stored with ``--gguf-weights file``: each is compared with
llama-cpp-python on the same weights, and with llama-cpp-python on the file as a user runs it. A trained
reader (``--model demo:smollm2-ifqa``) reads with its adapter merged into the F16 copy, beside llama-cpp-python
applying the adapter at every product (``lora_path``) on the F16 copy and on the file. One
run, one machine, the same prompts (ifqa builds them: instruction, the top passages of a run, the
question; no demonstrations unless --demos).

    python benchmarks/llamacpp_reader.py [--run RUN.jsonl] [--questions 40] [--passages 5] [--skip-hf] [--model M]

RUN is a run file (`ifqa retrieve ... --k 5`; e.g. IfQA supervised dev over mini-wiki's BM25 index); by
default the demo dev set over demo:bm25. Reported per path: seconds, questions/s, prompt and generated
tokens/s, ifqa's host time (everything but the runtime's own calls) and the ratio to llama-cpp-python.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).parent))
from common import Parser, machine, markdown_table  # noqa: E402

from ifqa.artifacts import QuestionSet, read_manifest, read_run  # noqa: E402
from ifqa.datasets import QuestionSource  # noqa: E402
from ifqa.llm.local_models import f16_copy, model_file  # noqa: E402
from ifqa.llm.session import ModelSession  # noqa: E402
from ifqa.llm.trained import trained_reader  # noqa: E402
from ifqa.readers.llm import reader as llm_reader  # noqa: E402
from ifqa.readers.llm.config import LLMReaderConfig  # noqa: E402
from tests.llm.reference import reference_llama  # noqa: E402

MODEL = "demo:smollm2"


def questions_and_run(run: str | None, n: int, folder: Path) -> tuple[QuestionSet, Path, str]:
    """The first ``n`` questions of a run file (its manifest names their set) and the run, or the demo dev
    set retrieved over demo:bm25 here."""
    import ifqa

    if run is None:
        questions = ifqa.load_questions("demo", "dev")
        path = folder / "run.jsonl"
        ifqa.Pipeline(k=5).run_to_file(questions, path, progress=False)
        label = "demo dev over demo:bm25"
    else:
        path = Path(run)
        recorded = (read_manifest(path) or {}).get("questions") or {}
        questions = QuestionSource.recorded(recorded).load() if recorded else None
        if questions is None:
            raise SystemExit(f"{run}: no manifest naming its questions (make it with ifqa retrieve)")
        label = f"{questions.name} over {Path(run).name}"
    records = {r["qid"]: r for r in read_run(path)}
    kept = [e for e in questions.examples if e.qid in records][:n]
    subset = folder / "subset.jsonl"  # the first n records, their questions checked by text (no manifest)
    subset.write_text("".join(json.dumps(records[e.qid]) + "\n" for e in kept), encoding="utf-8")
    return QuestionSet(questions.name, kept, questions.task), subset, f"{label}, {len(kept)} questions"


def ifqa_reading(config: LLMReaderConfig, questions: QuestionSet, run: Path, out: Path) -> tuple[dict, list[str]]:
    """ifqa's own reading; with the time inside the backend measured apart (the rest is ifqa's host time)."""
    session = ModelSession.open(config)
    inside = [0.0]
    complete = session.backend.complete

    def timed(prompts, params, *rest):
        started = time.perf_counter()
        try:
            return complete(prompts, params, *rest)
        finally:
            inside[0] += time.perf_counter() - started

    session.backend.complete = timed
    reader = llm_reader.LLMReader(session, config, [], {e.question for e in questions.examples})
    contexts = llm_reader.load_contexts(run, questions)
    prompts = [
        reader._prompt(reader.template, reader.selector, e, contexts[e.qid][: reader.config.passages]).text
        for e in questions.examples
    ]
    started = time.perf_counter()
    llm_reader.read_to_file(reader, questions, out, run, progress=False, contexts=contexts)
    seconds = time.perf_counter() - started
    counters = session.counters
    return (
        {
            "seconds": seconds,
            "prompt_tokens": counters.prompt_tokens,
            "completion_tokens": counters.completion_tokens,
            "host_seconds": seconds - inside[0],
            "weights": session.backend.describe().get("weights", ""),
            "loaded": getattr(session.backend, "loaded", None),
        },
        prompts,
    )


def runtime_alone(
    source: Path, prompts: list[str], threads: int, max_tokens: int, stops: list[str], lora: Path | None = None
) -> dict:
    """llama-cpp-python as a user calls it on ``source`` (with the LoRA adapter ``lora`` applied, as its
    ``lora_path`` applies one): one chat completion after another (its own prefix reuse on)."""
    # llama_cpp.Llama with its AMX weight buffers off on a CPU with AMX, as ifqa loads it
    # (llama.cpp's AMX kernel crashes on Q4_1 there); elsewhere exactly llama_cpp.Llama
    adapter = {"lora_path": str(lora)} if lora else {}
    llm = reference_llama(source, n_ctx=8192, n_threads=threads, flash_attn=True, **adapter)
    prompt_tokens = completion_tokens = 0
    started = time.perf_counter()
    for prompt in prompts:
        reply = llm.create_chat_completion(
            messages=[{"role": "user", "content": prompt}], max_tokens=max_tokens, temperature=0, stop=stops
        )
        prompt_tokens += reply["usage"]["prompt_tokens"]
        completion_tokens += reply["usage"]["completion_tokens"]
    return {
        "seconds": time.perf_counter() - started,
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "host_seconds": 0.0,
    }


def main() -> None:
    parser = Parser()
    parser.add_argument("--run", input_file=True, help="Run file whose top passages are read (default: demo dev).")
    parser.add_argument("--questions", type=int, default=40)
    parser.add_argument("--passages", type=int, default=5)
    parser.add_argument("--demos", type=int, default=0, at_least=0)
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--threads", type=int, default=len(os.sched_getaffinity(0)))
    parser.add_argument("--skip-hf", action="store_true", help="Leave out transformers (28 s to dequantize).")
    parser.add_argument(
        "--model",
        default=MODEL,
        help="A trained reader with a LoRA adapter (demo:smollm2-ifqa, a folder ifqa train llm made) reads with "
        "its card's prompt settings, beside llama-cpp-python applying its adapter (lora_path).",
    )
    args = parser.parse_args()
    trained = trained_reader(args.model)
    base, lora = trained.checked_adapter() if trained is not None else (model_file(args.model), None)
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["IFQA_CACHE_DIR"] = str(Path(tmp) / "cache")
        questions, run, label = questions_and_run(args.run, args.questions, Path(tmp))
        common = {"model": args.model, "no_cache": True}
        if trained is None:  # a trained reader reads as its card says
            common |= {"mode": "open", "passages": args.passages, "demos": args.demos}
        measured, compared = [], {}  # (path, measures, the llama-cpp-python path it is compared with)
        adapted = " + adapter" if lora else ""
        for weights in ("auto", "file"):  # auto: the F16 working copy of the Q4_1 file; file: Q4_1 as stored
            config = LLMReaderConfig(
                **common, model_threads=args.threads, batch_size=args.batch_size, gguf_weights=weights
            )
            ours, prompts = ifqa_reading(config, questions, run, Path(tmp) / f"ifqa-{weights}.jsonl")
            kind = ("F16 copy" if weights == "auto" else "Q4_1 file") + adapted
            source = f16_copy(base) if weights == "auto" else base
            compared[kind] = runtime_alone(source, prompts, args.threads, 32, ["\nQuestion:", "\n\n"], lora)
            measured.append((f"llama-cpp-python one by one, {kind}", compared[kind], kind))
            if lora and weights == "auto":  # ifqa reads the adapter merged into the F16 copy: the same weights, alone
                kind = "F16 copy, adapter merged"
                merged = ours["loaded"]
                compared[kind] = runtime_alone(merged, prompts, args.threads, 32, ["\nQuestion:", "\n\n"])
                measured.append((f"llama-cpp-python one by one, {kind}", compared[kind], kind))
            flag = "" if weights == "auto" else " --gguf-weights file"
            measured.append((f"ifqa --backend llamacpp{flag} (batch {args.batch_size}), {kind}", ours, kind))
        for dtype in () if args.skip_hf else ("float32", "auto"):  # auto: bfloat16 on a CPU with AMX
            hf = LLMReaderConfig(**common, backend="hf", device="cpu", batch_size=args.batch_size, dtype=dtype)
            read = ifqa_reading(hf, questions, run, Path(tmp) / f"hf-{dtype}.jsonl")[0]
            flag = f" --dtype {dtype}" if dtype != "auto" else ""
            name = f"ifqa --backend hf{flag} ({read['weights']}, batch {args.batch_size})"
            measured.append((name, read, "Q4_1 file" + adapted))
    n, baseline = len(questions.examples), compared["Q4_1 file" + adapted]["seconds"]
    rows = [
        {
            "path": name,
            "seconds": m["seconds"],
            "s/question": m["seconds"] / n,
            "prompt tok/s": m["prompt_tokens"] / m["seconds"],
            "generated tok/s": m["completion_tokens"] / m["seconds"],
            "host %": 100 * m["host_seconds"] / m["seconds"],
            "vs llama-cpp-python, same weights": compared[kind]["seconds"] / m["seconds"],
            "vs llama-cpp-python on the file": baseline / m["seconds"],
            "700 questions (min)": 700 * m["seconds"] / n / 60,
        }
        for name, m, kind in measured
    ]
    print(
        f"machine: {machine()}; {label}; {args.passages} passages, {args.demos} demonstrations, {args.threads} threads\n"
    )
    print(markdown_table(rows, digits=2))


if __name__ == "__main__":
    main()
