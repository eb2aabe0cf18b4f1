"""Passage builder throughput against WikiExtractor, text agreement, and a full-dump projection.

    python benchmarks/corpus_build.py [--copies 50]

Prints Markdown tables:
1. throughput on XML: a synthetic multistream dump (``--copies`` copies of the real dump fragment's
   pages, ~6 MB of XML each, laid out as Wikipedia's multistream dumps; see
   synthetic_multistream.py), ifqa with 1 and 2 workers beside WikiExtractor (``--no-templates``,
   the configuration closest to ours, and its default, which expands templates) with 1 and 2
   processes. "Per core" is XML megabytes per CPU-second of every process of the command
   (WikiExtractor's reader, extractors and writer; ifqa's reading process and workers);
2. the same on WikiExtractor JSON input (no markup to clean: reading and splitting only);
3. text agreement with WikiExtractor + a plain 100-word split on the real fragment;
4. a projection for the full English dump on 16 cores from the 2-worker run's CPU accounting.
"""

from __future__ import annotations

import collections
import difflib
import json
import shutil
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from common import SHARED, WORK, Parser, ifqa, machine, markdown_table, timed  # noqa: E402
from synthetic_multistream import write_multistream  # noqa: E402

FRAGMENT = SHARED / "wikidump" / "enwiki-latest-pages-articles1.xml-p000000010p000030302-shortened.bz2"
JSON_INPUTS = [
    SHARED / "wiki" / "enwiki2015_sample_articles.jsonl.gz",
    SHARED / "wiki" / "enwiki2021_articles.jsonl.gz",
]
#: Full English dump, approximately: pages-articles-multistream.xml.bz2 is ~22 GB and holds ~100 GB
#: of XML (the figure the projection scales to; the cost per MB of XML is what was measured).
FULL_DUMP_XML_MB = 100_000
CORES = 16


def ifqa_build(inputs: list[Path], workers: int, label: str, xml_mb: float | None) -> dict:
    output = WORK / f"bench-{label}-{workers}.jsonl"
    seconds, peak, run = timed(ifqa("corpus", "build", *inputs, "-o", output, "--workers", workers, "--no-progress"))
    manifest = json.loads(Path(f"{output}.manifest.json").read_text())
    row = {
        "tool": f"ifqa --workers {workers}",
        "input": label,
        "wall s": seconds,
        "CPU s": run.cpu_seconds,
        "passages": manifest["summary"]["passages"],
        "peak MB": peak,
    }
    if xml_mb:
        row["XML MB per CPU-s"] = xml_mb / run.cpu_seconds
    row["manifest"] = manifest
    return row


def wikiextractor(dump: Path, processes: int, templates: bool, xml_mb: float) -> dict:
    out = WORK / "wikiextractor-out"
    shutil.rmtree(out, ignore_errors=True)
    command = [
        sys.executable,
        "-m",
        "wikiextractor.WikiExtractor",
        str(dump),
        "--json",
        "-o",
        str(out),
        "--processes",
        str(processes),
        "-q",
    ] + ([] if templates else ["--no-templates"])
    seconds, peak, run = timed(command)
    passages = len(passages_of(split_articles(out)))
    label = "WikiExtractor" + ("" if templates else " --no-templates") + f" --processes {processes}"
    return {
        "tool": label,
        "input": "synthetic multistream",
        "wall s": seconds,
        "CPU s": run.cpu_seconds,
        "passages": passages,
        "peak MB": peak,
        "XML MB per CPU-s": xml_mb / run.cpu_seconds,
    }


def split_articles(folder: Path) -> dict[str, tuple[str, str]]:
    articles = {}
    for path in sorted(folder.rglob("wiki_*")):
        for line in path.read_text().splitlines():
            record = json.loads(line)
            if record["text"].strip():
                articles[record["id"]] = (record["title"], record["text"])
    return articles


def passages_of(articles: dict[str, tuple[str, str]]) -> dict[str, str]:
    out = {}
    for article_id, (_, text) in articles.items():
        words = text.split()
        for n, start in enumerate(range(0, len(words), 100)):
            out[f"{article_id}-{n}"] = " ".join(words[start : start + 100])
    return out


def agreement() -> tuple[dict, list[str]]:
    """ifqa's passages against WikiExtractor's articles split the same way, on the real fragment."""
    ours_out = WORK / "xml-ours.jsonl"
    timed(ifqa("corpus", "build", FRAGMENT, "-o", ours_out, "--no-progress"))
    wx_dir = WORK / "wikiextractor-fragment"
    shutil.rmtree(wx_dir, ignore_errors=True)
    timed(
        [
            sys.executable,
            "-m",
            "wikiextractor.WikiExtractor",
            str(FRAGMENT),
            "--json",
            "-o",
            str(wx_dir),
            "--processes",
            "1",
            "-q",
        ]
    )
    wx_articles = split_articles(wx_dir)
    theirs = passages_of(wx_articles)
    ours = {p["id"]: p["text"] for p in map(json.loads, ours_out.read_text().splitlines())}
    our_articles = collections.defaultdict(list)
    for pid, text in ours.items():
        our_articles[pid.rsplit("-", 1)[0]].append(text)
    both = set(our_articles) & set(wx_articles)
    shared_passages = [pid for pid in ours if pid.rsplit("-", 1)[0] in both]
    identical = sum(1 for pid in shared_passages if theirs.get(pid) == ours[pid])
    only_ours, only_theirs, similarity = collections.Counter(), collections.Counter(), []
    for article_id in sorted(both):
        a, b = " ".join(our_articles[article_id]).split(), wx_articles[article_id][1].split()
        matcher = difflib.SequenceMatcher(None, a, b, autojunk=False)
        similarity.append(matcher.ratio())
        for op, i1, i2, j1, j2 in matcher.get_opcodes():
            if op != "equal":
                only_ours.update(a[i1:i2])
                only_theirs.update(b[j1:j2])
    result = {
        "articles ifqa": len(our_articles),
        "articles WikiExtractor": len(wx_articles),
        "passages ifqa": len(ours),
        "passages WikiExtractor": len(theirs),
        "identical passages (% of ifqa's, articles both kept)": 100 * identical / len(shared_passages),
        "mean word-level similarity per article (%)": 100 * sum(similarity) / len(similarity),
    }
    notes = [
        f"only in ifqa's text, most frequent tokens: {only_ours.most_common(12)}",
        f"only in WikiExtractor's text, most frequent tokens: {only_theirs.most_common(12)}",
        f"articles only WikiExtractor kept: {[wx_articles[a][0] for a in sorted(set(wx_articles) - set(our_articles))][:10]}",
        f"articles only ifqa kept: {sorted(set(our_articles) - set(wx_articles))[:10]}",
    ]
    return result, notes


def projection(two_workers: dict, one_worker: dict, xml_mb: float) -> str:
    """Amdahl with measured parts: the workers' CPU per MB spread over CORES at the measured
    2-worker efficiency, plus the reading process (runs beside the workers) and the final join."""
    cpu = two_workers["manifest"]["cpu_seconds"]
    scale = FULL_DUMP_XML_MB / xml_mb
    efficiency = one_worker["wall s"] / two_workers["wall s"] / 2
    workers_s = cpu["workers"] * scale / (CORES * efficiency)
    reading_s = cpu["reading_process"] * scale
    joining_s = cpu["joining"] * scale
    total = max(workers_s, reading_s) + joining_s
    return (
        f"projection, full English dump (~{FULL_DUMP_XML_MB / 1000:.0f} GB of XML, multistream) on {CORES} cores: "
        f"workers {cpu['workers'] / xml_mb * 1000:.1f} CPU-ms per MB of XML -> {workers_s / 60:.1f} min at the measured "
        f"2-worker efficiency ({100 * efficiency:.0f}%); the reading process (finding streams, writing parts) "
        f"{reading_s / 60:.1f} min beside them; joining the parts {joining_s / 60:.1f} min after: "
        f"**about {total / 60:.0f} min**"
    )


def main() -> None:
    parser = Parser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--copies", type=int, default=50, help="copies of the fragment in the synthetic dump")
    args = parser.parse_args()
    WORK.mkdir(parents=True, exist_ok=True)
    print(f"machine: {machine()}\n")
    dump = WORK / f"synthetic-{args.copies}-multistream.xml.bz2"
    started = time.time()
    sizes = write_multistream(FRAGMENT, dump, args.copies)
    print(
        f"synthetic multistream dump: {sizes['pages']:,} pages, {sizes['xml MB']:.0f} MB of XML, "
        f"{sizes['bz2 MB']:.0f} MB bz2 (written in {time.time() - started:.0f} s)\n"
    )
    xml_mb = sizes["xml MB"]
    rows = [ifqa_build([dump], w, "synthetic multistream", xml_mb) for w in (1, 2)]
    rows += [wikiextractor(dump, p, templates=False, xml_mb=xml_mb) for p in (1, 2)]
    rows.append(wikiextractor(dump, 1, templates=True, xml_mb=xml_mb))
    reference = rows[2]["XML MB per CPU-s"]
    for row in rows:
        row["per core vs WikiExtractor --no-templates"] = row["XML MB per CPU-s"] / reference
    print(markdown_table(rows, skip=("manifest", "input")), "\n")
    json_rows = [ifqa_build(JSON_INPUTS, w, "WikiExtractor JSON", None) for w in (1, 2)]
    print(markdown_table(json_rows, skip=("manifest",)), "\n")
    result, notes = agreement()
    print(markdown_table([result]), "\n")
    print("\n".join(f"- {note}" for note in notes), "\n")
    print(f"ifqa --workers 2, CPU seconds by part (build manifest): {rows[1]['manifest']['cpu_seconds']}\n")
    print(projection(rows[1], rows[0], xml_mb))


if __name__ == "__main__":
    main()
