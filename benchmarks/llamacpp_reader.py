"""Open-book reading with a real model at the runtime's pace: the same prompts read by ifqa (`--backend
llamacpp`: a wave generated together, the shared prefix evaluated once), straight through llama-cpp-python
one by one (its `create_chat_completion`, as a user would call it), and through `--backend hf` (transformers
dequantizes the GGUF file to fp32) with batching. One run, one machine, the same prompts (ifqa builds
them: instruction, the top passages of a run, the question; no demonstrations unless --demos).

    python benchmarks/llamacpp_reader.py [--run RUN.jsonl] [--questions 40] [--passages 5] [--skip-hf]

RUN is a run file (`ifqa retrieve ... --k 5`; e.g. IfQA supervised dev over mini-wiki's BM25 index); by
default the demo dev set over demo:bm25. Reported per path: seconds, questions/s, prompt and generated
tokens/s, ifqa's host time (everything but the runtime's own calls) and the ratio to llama-cpp-python.
"""

from __future__ import annotations

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
from ifqa.llm.local_models import model_file  # noqa: E402
from ifqa.llm.session import ModelSession  # noqa: E402
from ifqa.readers.llm import reader as llm_reader  # noqa: E402
from ifqa.readers.llm.config import LLMReaderConfig  # noqa: E402

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
    qids = {r["qid"] for r in read_run(path)}
    kept = [e for e in questions.examples if e.qid in qids][:n]
    return QuestionSet(questions.name, kept, questions.task), path, f"{label}, {len(kept)} questions"


def ifqa_reading(config: LLMReaderConfig, questions: QuestionSet, run: Path, out: Path) -> tuple[dict, list[str]]:
    """ifqa's own reading; with the time inside the backend measured apart (the rest is ifqa's host time)."""
    session = ModelSession.open(config)
    inside = [0.0]
    complete = session.backend.complete

    def timed(prompts, params):
        started = time.perf_counter()
        try:
            return complete(prompts, params)
        finally:
            inside[0] += time.perf_counter() - started

    session.backend.complete = timed
    reader = llm_reader.LLMReader(session, config, [], {e.question for e in questions.examples})
    contexts = llm_reader.load_contexts(run, questions)
    prompts = [
        reader._prompt(reader.template, reader.selector, e, contexts[e.qid][: config.passages]).text
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
        },
        prompts,
    )


def runtime_alone(prompts: list[str], threads: int, max_tokens: int, stops: list[str]) -> dict:
    """llama-cpp-python as a user calls it: one chat completion after another (its own prefix reuse on)."""
    import llama_cpp

    llm = llama_cpp.Llama(
        model_path=str(model_file(MODEL)), n_ctx=8192, n_threads=threads, verbose=False, flash_attn=True
    )
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
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["IFQA_CACHE_DIR"] = str(Path(tmp) / "cache")
        questions, run, label = questions_and_run(args.run, args.questions, Path(tmp))
        common = {"model": MODEL, "mode": "open", "passages": args.passages, "demos": args.demos, "no_cache": True}
        config = LLMReaderConfig(**common, model_threads=args.threads, batch_size=args.batch_size)
        ours, prompts = ifqa_reading(config, questions, run, Path(tmp) / "ifqa.jsonl")
        alone = runtime_alone(prompts, args.threads, 32, ["\nQuestion:", "\n\n"])
        measured = [
            ("llama-cpp-python, one by one", alone),
            (f"ifqa --backend llamacpp (batch {args.batch_size})", ours),
        ]
        if not args.skip_hf:
            hf = LLMReaderConfig(**common, backend="hf", device="cpu", batch_size=args.batch_size)
            measured.append(
                (
                    f"ifqa --backend hf (fp32, batch {args.batch_size})",
                    ifqa_reading(hf, questions, run, Path(tmp) / "hf.jsonl")[0],
                )
            )
    n = len(questions.examples)
    for name, m in measured:
        rows.append(
            {
                "path": name,
                "seconds": m["seconds"],
                "s/question": m["seconds"] / n,
                "prompt tok/s": m["prompt_tokens"] / m["seconds"],
                "generated tok/s": m["completion_tokens"] / m["seconds"],
                "prompt tokens/question": m["prompt_tokens"] / n,
                "host %": 100 * m["host_seconds"] / m["seconds"],
                "throughput vs llama-cpp-python": alone["seconds"] / m["seconds"],
            }
        )
    print(
        f"machine: {machine()}; {label}; {args.passages} passages, {args.demos} demonstrations, {args.threads} threads\n"
    )
    print(markdown_table(rows, digits=2))


if __name__ == "__main__":
    main()
