"""A trained reader read by llama.cpp and by transformers on the same run: how often their greedy answers
are the same (issue #82 asks at least 95% of IfQA dev's 700), and each backend's wall time and EM.

    python benchmarks/backend_agreement.py --run RUN --setting supervised --split dev
        [--model demo:smollm2-ifqa] [--llama-cpp-python DIR] [--skip-hf] [--work DIR]

Each read is ``ifqa read llm`` as a user types it, without the response cache (``--no-cache``), so its
seconds are its own (start-up included). ``--llama-cpp-python DIR`` puts a llama-cpp-python installed
into DIR first on the llama.cpp read's path: one built for AVX2 only times the AVX2 kernels on any x86
CPU (``CMAKE_ARGS="-DGGML_NATIVE=OFF -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_AVX512=OFF"
pip install --no-deps --target DIR llama-cpp-python==VERSION``). ``--skip-hf`` times llama.cpp alone
and compares it with the transformers predictions already in the work folder. The predictions stay in
``--work`` (default benchmarks/.work/backend-agreement); a Markdown table and the questions whose answers
differ are printed.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import WORK, Parser, answers, evaluation, ifqa, machine, markdown_table, timed  # noqa: E402


def read(backend: str, args, out: Path, path_first: Path | None = None) -> float:
    """Seconds of one ``ifqa read llm`` with ``backend`` into ``out``."""
    env = dict(os.environ)
    if path_first is not None:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(path_first), env.get("PYTHONPATH")]))
    command = ifqa("read", "llm", "--model", args.model, "--backend", backend, "--run", args.run, "--no-cache")
    command += ["--setting", args.setting, "--split", args.split, "-o", out]
    seconds, _, _ = timed(command, env=env)
    return seconds


def main() -> None:
    parser = Parser(description=__doc__.splitlines()[0])
    parser.add_argument("--run", required=True, input_file=True, help="a run file (`ifqa retrieve ... --k 5`)")
    parser.add_argument("--setting", default="supervised", help="the run's question set (default supervised)")
    parser.add_argument("--split", default="dev", help="the run's split (default dev)")
    parser.add_argument("--model", default="demo:smollm2-ifqa", help="a trained reader (default the shipped one)")
    parser.add_argument("--llama-cpp-python", type=Path, help="a folder holding another llama-cpp-python build")
    parser.add_argument("--skip-hf", action="store_true", help="reuse the transformers predictions in --work")
    parser.add_argument("--work", type=Path, default=WORK / "backend-agreement", help="where predictions go")
    args = parser.parse_args()
    llamacpp, hf = args.work / "llamacpp.jsonl", args.work / "hf.jsonl"
    if args.skip_hf and not hf.is_file():
        parser.exit(1, f"backend_agreement: --skip-hf: {hf} is not there yet (run once without it)\n")
    args.work.mkdir(parents=True, exist_ok=True)
    rows = [{"backend": "llamacpp", "seconds": read("llamacpp", args, llamacpp, args.llama_cpp_python)}]
    if not args.skip_hf:
        rows.append({"backend": "hf", "seconds": read("hf", args, hf)})
    first, second = answers(llamacpp), answers(hf)
    differ = sorted((qid for qid in first if first[qid] != second.get(qid)), key=lambda q: (len(q), q))
    for row in rows:
        row["EM"] = float(evaluation(llamacpp if row["backend"] == "llamacpp" else hf, args.setting, args.split)["em"])
    same = len(first) - len(differ)
    print(f"{args.model} on {args.run} ({machine()}; llama-cpp-python from {args.llama_cpp_python or 'the venv'})")
    print(markdown_table(rows, digits=2))
    print(f"\nthe same answer for {same} of {len(first)} questions ({same / len(first):.1%})")
    for qid in differ:
        print(f"- {qid}: llama.cpp {first[qid]!r}, transformers {second.get(qid)!r}")


if __name__ == "__main__":
    main()
