"""Put a reader ``ifqa train llm`` made into the install as ``demo:NAME``: its adapter and its card, the card
completed with what a user of the shipped weights must know (the commit that packed them, the one command
that reproduces them, what they were trained on, the dev scores ``ifqa evaluate`` gave them).

    python benchmarks/ship_reader.py --reader readers/mini-lora16/best \
        --evaluation measure/A-cpp.eval.json --command "ifqa train llm ..." --name smollm2-ifqa

Only the adapter (LoRA factors, no text) and the card are copied: no IfQA text enters the package."""

from __future__ import annotations

import argparse
import json
import logging
import shutil
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import Parser  # noqa: E402

from ifqa.cards import CARD  # noqa: E402
from ifqa.io import atomic_dir  # noqa: E402
from ifqa.llm.gguf_forms import ADAPTER  # noqa: E402
from ifqa.llm.local_models import DEMO_READERS  # noqa: E402
from ifqa.llm.trained import trained_reader  # noqa: E402

log = logging.getLogger("ship_reader")
ROOT = Path(__file__).resolve().parents[1]
#: what the weights were learned from, said in the card and the README (IfQA publishes no licence)
PROVENANCE = (
    "LoRA factors learned by ifqa train llm from IfQA's supervised train split (Yu et al., EMNLP 2023: "
    "questions, answers, and BM25's top passages over mini-wiki, a 2015 Wikipedia sample plus IfQA's gold "
    "passages). IfQA publishes no licence: no IfQA text is in this package, only weights trained on it."
)


def ship(reader: Path, evaluation: Path, command: str, name: str) -> Path:
    found = trained_reader(str(reader))
    if found is None or found.adapter is None:  # trained_reader: a card of kind llm-reader, else None
        raise SystemExit(f"{reader}: not a trained reader holding {ADAPTER}")
    found.checked_adapter()  # its bytes, its base's digest and shapes: what every read checks
    scores = json.loads(evaluation.read_text(encoding="utf-8"))
    commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=True)
    card = {
        **found.card,
        "shipped": {
            "name": f"demo:{name}",
            "commit": commit.stdout.strip(),
            "trained_on": PROVENANCE,
            "reproduce": command,
            "dev": {key: scores[key] for key in ("n", "em", "em_ci95", "f1", "containment") if key in scores},
        },
    }
    target = ROOT / "ifqa" / "demo" / "readers" / name
    with atomic_dir(target) as tmp:
        shutil.copyfile(found.adapter, tmp / ADAPTER)
        (tmp / CARD).write_text(json.dumps(card, indent=2) + "\n", encoding="utf-8")
    log.info("shipped %s as demo:%s (%s, %.1f MB)", reader, name, target, (target / ADAPTER).stat().st_size / 1e6)
    return target


def main() -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    parser = Parser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--reader", type=Path, required=True, help="a trained reader folder (best/)")
    parser.add_argument("--evaluation", input_file=True, required=True, help="ifqa evaluate --json of its dev read")
    parser.add_argument("--command", required=True, help="the ifqa train llm command that made it")
    parser.add_argument("--name", default=DEMO_READERS[0], choices=DEMO_READERS)
    args = parser.parse_args()
    ship(args.reader, args.evaluation, args.command, args.name)


if __name__ == "__main__":
    main()
