"""`ifqa index bm25 --corpus hf:FOLDER` (a local Parquet dataset in Hub layout) beside the same
passages as JSONL: wall time and peak memory, in one run, on the same machine.

    python benchmarks/hub_corpus.py [--source FILE] [--passages 1000000]

The collection is ``--source`` (default: the mini-wiki passages benchmarks/.work holds, from
`ifqa corpus build` of ../shared/data/wiki) repeated with new ids up to ``--passages``; it is
written once as JSONL and once as a Parquet dataset with a card (columns ``docid``, ``title``,
``contents``, so the field mapping is exercised). Each index is built in a fresh cache (the hf: run
includes reading the Parquet files into datasets' Arrow cache and writing the passages JSONL).
Goal (#57): the hf: build within 1.2x the JSONL build's time, at no more peak memory.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path

from common import WORK, Parser, ifqa, machine, markdown_table, timed

CARD = """---
configs:
- config_name: default
  data_files:
  - split: train
    path: data/train-*
---
# Passages for benchmarks/hub_corpus.py
"""


def collection(source: Path, passages: int, folder: Path) -> tuple[Path, Path]:
    """The JSONL and the Parquet dataset folder of ``passages`` passages (made once)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    jsonl, hub = folder / f"passages-{passages}.jsonl", folder / f"hub-{passages}"
    if jsonl.exists() and (hub / "README.md").exists():
        return jsonl, hub
    rows = [json.loads(line) for line in source.open(encoding="utf-8")]
    (hub / "data").mkdir(parents=True, exist_ok=True)
    writer = None
    with jsonl.open("w", encoding="utf-8") as out:
        for start in range(0, passages, 100_000):
            batch = []
            for i in range(start, min(passages, start + 100_000)):
                row = rows[i % len(rows)]
                batch.append({"id": f"{row['id']}~{i // len(rows)}", "title": row["title"], "text": row["text"]})
            out.write("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in batch))
            table = pa.table(
                {
                    "docid": [r["id"] for r in batch],
                    "title": [r["title"] for r in batch],
                    "contents": [r["text"] for r in batch],
                }
            )
            writer = writer or pq.ParquetWriter(str(hub / "data" / "train-00000-of-00001.parquet"), table.schema)
            writer.write_table(table)
    writer.close()
    (hub / "README.md").write_text(CARD)
    return jsonl, hub


def build(corpus: str, work: Path, label: str) -> dict:
    cache = Path(tempfile.mkdtemp(prefix="hub-corpus-cache-", dir=work))
    out = work / f"index-{label}"
    shutil.rmtree(out, ignore_errors=True)
    env = {
        **os.environ,
        "IFQA_CACHE_DIR": str(cache),
        "HF_HUB_OFFLINE": "1",
        "HF_DATASETS_CACHE": str(cache / "hf"),
    }
    seconds, peak, _ = timed(
        ifqa("index", "bm25", "--engine", "bm25s", "--corpus", corpus, "-o", out, "--no-progress"), env=env
    )
    passages = json.loads((out / "manifest.json").read_text())["passages"]
    shutil.rmtree(cache, ignore_errors=True)
    shutil.rmtree(out, ignore_errors=True)
    return {"corpus": label, "passages": f"{passages:,}", "seconds": seconds, "peak MB": peak}


def main() -> None:
    parser = Parser(description=__doc__.splitlines()[0])
    parser.add_argument("--source", default=str(WORK / "mini-wiki.jsonl"), input_file=True)
    parser.add_argument("--passages", type=int, default=1_000_000)
    args = parser.parse_args()
    WORK.mkdir(parents=True, exist_ok=True)
    jsonl, hub = collection(Path(args.source), args.passages, WORK)
    rows = [build(str(jsonl), WORK, "JSONL"), build(f"hf:{hub}?fields=id:docid,text:contents", WORK, "hf: Parquet")]
    time_ratio = rows[1]["seconds"] / rows[0]["seconds"]
    memory_ratio = rows[1]["peak MB"] / rows[0]["peak MB"]
    print(f"{machine()}\n")
    print(markdown_table(rows))
    print(f"\nhf: ÷ JSONL: time {time_ratio:.2f}x (goal ≤ 1.2x), peak memory {memory_ratio:.2f}x (goal ≤ 1x)")


if __name__ == "__main__":
    main()
