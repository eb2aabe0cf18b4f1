"""The walk of one ``--device`` through ``ifqa train fid`` (issue #85): from the command line to the model's
first ``.to(device)``, every ifqa function called with the device in one of its parameters (a stop) and the
modules those functions live in (rooms), on a tiny T5 trained one step on the CPU.

    python benchmarks/device_walk.py                 # this tree
    python benchmarks/device_walk.py --tree DIR      # another checkout (a git worktree of an older commit)

A parameter holds the device when it is the string given to ``--device`` (``cpu``), an ifqa ``Device`` or a
``torch.device``. The generic checks every option's value passes through (the option checker, the output
guard, the secret redactor, the index-spec parser) are counted, and named apart.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import ROOT, Parser  # noqa: E402

#: modules every option's value passes through, whatever the option
GENERIC = ("cli/options.py", "outputs.py", "redact.py", "registry.py")

WALK = r"""
import json, sys
from pathlib import Path
tree, t5, run, out = map(Path, sys.argv[1:5])
sys.path.insert(0, str(tree))
import torch
import transformers.modeling_utils  # imported before the walk: a profiled import is seconds slower, and holds no device
from transformers import T5ForConditionalGeneration  # noqa: F401 - the model's module, the same
import ifqa
from ifqa.cli import main
package = str(Path(ifqa.__file__).resolve().parent) + "/"
stops, done = [], []

def holds_device(value):
    return value == "cpu" if isinstance(value, str) else type(value).__name__ == "Device" or isinstance(value, torch.device)

def profile(frame, event, arg):
    if done or event != "call":
        return
    code = frame.f_code
    if code.co_name == "to" and isinstance(frame.f_locals.get("self"), torch.nn.Module):
        given = [*frame.f_locals.get("args", ()), *(frame.f_locals.get("kwargs") or {}).values()]
        caller = frame.f_back.f_code.co_filename
        if caller.startswith(package) and any(holds_device(v) for v in given):
            stops.append([caller.removeprefix(package), "the model's .to"])
            done.append(True)
            sys.setprofile(None)  # the walk ends here: the step trains unprofiled
        return
    if code.co_filename.startswith(package):
        names = code.co_varnames[: code.co_argcount + code.co_kwonlyargcount]
        if any(holds_device(frame.f_locals.get(name)) for name in names):
            stops.append([code.co_filename.removeprefix(package), code.co_name])

sys.setprofile(profile)
try:
    main(["train", "--reader", "fid", "--run", str(run), "--model", str(t5), "--output", str(out), "--steps", "1",
          "--batch-size", "2", "--n-context", "2", "--text-maxlength", "16", "--answer-maxlength", "4",
          "--no-progress", "--device", "cpu"])
except SystemExit:
    pass
finally:
    sys.setprofile(None)
print("WALK " + json.dumps(stops))
"""


def walk(tree: Path, work: Path) -> list[list[str]]:
    """The stops of the device through ``tree``'s ``ifqa train fid``, in order: [module, function]."""
    sys.path.insert(0, str(ROOT))
    from tests.readers.tiny_models import tiny_t5

    run = work / "toy.jsonl"
    ctxs = [{"id": str(j), "title": "t", "text": "a passage"} for j in range(2)]
    run.write_text(
        "".join(
            json.dumps({"qid": str(i), "question": f"q{i}?", "answers": ["a"], "ctxs": ctxs}) + "\n" for i in range(4)
        )
    )
    t5 = tiny_t5(work / "t5")
    result = subprocess.run(
        [sys.executable, "-c", WALK, str(tree), str(t5), str(run), str(work / "out")], capture_output=True, text=True
    )
    found = [line for line in result.stdout.splitlines() if line.startswith("WALK ")]
    if not found or not json.loads(found[-1][5:]):
        raise SystemExit(f"device_walk: no walk recorded in {tree}:\n{result.stderr[-2000:]}")
    return json.loads(found[-1][5:])


def main() -> None:
    parser = Parser(description=__doc__)
    parser.add_argument("--tree", default=str(ROOT), help="the checkout whose ifqa is walked (default: this one)")
    args = parser.parse_args()
    tree = Path(args.tree).resolve()
    if not (tree / "ifqa" / "__init__.py").is_file():
        parser.exit(1, f"device_walk: --tree {tree}: no ifqa package there\n")
    with tempfile.TemporaryDirectory() as work:
        stops = walk(tree, Path(work))
    rooms = sorted({module for module, _ in stops})
    devices = sum(module == "devices.py" for module, _ in stops)
    print(
        f"{tree}: {len(stops)} stops, {len(rooms)} rooms ({len([r for r in rooms if r not in GENERIC])} past the "
        f"generic option checks), devices.py entered {devices} times"
    )
    print("rooms: " + ", ".join(f"{r}{' (generic)' if r in GENERIC else ''}" for r in rooms))
    print("stops: " + " > ".join(f"{module}:{name}" for module, name in stops))


if __name__ == "__main__":
    main()
