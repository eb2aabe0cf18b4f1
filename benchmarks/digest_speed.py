"""What keying cached answers by a model file's whole content costs: ``local_models.whole_digest``
(xxh3-128) over files of the given sizes, beside sha256 (what the digest was before), each read twice:
the first read as the file lies after being written, the second from the page cache.

    python benchmarks/digest_speed.py [--sizes 1,14] [--folder DIR]

A digest is computed once per file content: ``file_digest`` remembers it under the file's inode, size
and times, so a model read again unchanged costs a ``stat``. Writes the files (random blocks) into
``--folder`` (default a temporary folder) and removes them.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import Parser, machine, markdown_table  # noqa: E402

from ifqa.io import file_sha256  # noqa: E402
from ifqa.llm.local_models import whole_digest  # noqa: E402

BLOCK = 64 << 20


def main() -> None:
    parser = Parser(description=__doc__)
    parser.add_argument("--sizes", default="1,14", help="file sizes in GiB, comma-separated (default 1,14)")
    parser.add_argument("--folder", help="where the files are written (default: a temporary folder)")
    args = parser.parse_args()
    try:
        sizes = [float(s) for s in args.sizes.split(",")]
    except ValueError:
        parser.error(f"--sizes {args.sizes!r}: give sizes in GiB, comma-separated")
    folder = Path(args.folder or tempfile.mkdtemp())
    block, rows = os.urandom(BLOCK), []
    for size in sizes:
        path = folder / f"model-{size:g}.bin"
        with open(path, "wb") as handle:
            for _ in range(max(1, int(size * (1 << 30) // BLOCK))):
                handle.write(block)
        gib = path.stat().st_size / (1 << 30)
        row = {"file GiB": round(gib, 2)}
        for name, digest in (("xxh3-128", whole_digest), ("sha256", file_sha256)):
            for read in ("first", "cached"):
                started = time.perf_counter()
                digest(path)
                row[f"{name} {read} s"] = round(time.perf_counter() - started, 2)
        row["xxh3 cached GiB/s"] = round(gib / row["xxh3-128 cached s"], 2)
        rows.append(row)
        path.unlink()
    print(f"{machine()}\n")
    print(markdown_table(rows, 2))


if __name__ == "__main__":
    main()
