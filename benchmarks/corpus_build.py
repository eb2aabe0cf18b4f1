"""Passage builder throughput, and agreement with WikiExtractor + a plain 100-word split.

    python benchmarks/corpus_build.py

Prints Markdown tables: throughput on the WikiExtractor JSON articles and on the XML dump fragments
(1 and 2 workers), the side-by-side run on the XML fragment, and a projection for a full dump.
"""

from __future__ import annotations

import collections
import difflib
import json
import shutil
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from common import SHARED, WORK, ifqa, machine, markdown_table, timed  # noqa: E402

XML = SHARED / "wikidump" / "enwiki-latest-pages-articles1.xml-p000000010p000030302-shortened.bz2"
JSON_INPUTS = [SHARED / "wiki" / "enwiki2015_sample_articles.jsonl.gz", SHARED / "wiki" / "enwiki2021_articles.jsonl.gz"]


def throughput(label: str, inputs: list[Path], workers: int) -> dict:
    output = WORK / f"bench-{label}-{workers}.jsonl"
    seconds, peak, _ = timed(ifqa("corpus", "build", *inputs, "-o", output, "--workers", workers, "--no-progress"))
    summary = json.loads(Path(f"{output}.manifest.json").read_text())["summary"]
    megabytes = sum(p.stat().st_size for p in inputs) / 1e6
    return {"input": label, "workers": workers, "seconds": seconds, "records/s": summary["records"] / seconds,
            "articles/s": summary["kept"] / seconds, "passages/s": summary["passages"] / seconds,
            "MB/s (compressed input)": megabytes / seconds, "peak MB": peak, "passages": summary["passages"],
            "kept": summary["kept"]}


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


def side_by_side() -> tuple[dict, list[str]]:
    ours_out = WORK / "xml-ours.jsonl"
    ours_seconds, _, _ = timed(ifqa("corpus", "build", XML, "-o", ours_out, "--no-progress"))
    wx_dir = WORK / "wikiextractor-out"
    shutil.rmtree(wx_dir, ignore_errors=True)
    wx_seconds, _, _ = timed([sys.executable, "-m", "wikiextractor.WikiExtractor", str(XML), "--json", "-o", str(wx_dir),
                              "--processes", "1", "-q"])
    wx_articles = split_articles(wx_dir)
    split_seconds_start = __import__("time").time()
    theirs = passages_of(wx_articles)
    wx_seconds += __import__("time").time() - split_seconds_start
    ours = {p["id"]: p["text"] for p in map(json.loads, ours_out.read_text().splitlines())}
    our_articles = collections.defaultdict(list)
    for pid, text in ours.items():
        our_articles[pid.rsplit("-", 1)[0]].append(text)
    both = set(our_articles) & set(wx_articles)
    shared_passages = [pid for pid in ours if pid.rsplit("-", 1)[0] in both]
    identical = sum(1 for pid in shared_passages if theirs.get(pid) == ours[pid])
    only_ours = collections.Counter()
    only_theirs = collections.Counter()
    similarity = []
    for article_id in sorted(both):
        a, b = " ".join(our_articles[article_id]).split(), wx_articles[article_id][1].split()
        matcher = difflib.SequenceMatcher(None, a, b, autojunk=False)
        similarity.append(matcher.ratio())
        for op, i1, i2, j1, j2 in matcher.get_opcodes():
            if op != "equal":
                only_ours.update(a[i1:i2])
                only_theirs.update(b[j1:j2])
    words_ours = sum(len(t.split()) for t in ours.values())
    words_theirs = sum(len(t.split()) for t in theirs.values())
    result = {"ifqa s": ours_seconds, "WikiExtractor + split s": wx_seconds, "time ratio (ifqa / WikiExtractor)": ours_seconds / wx_seconds,
              "articles ifqa": len(our_articles), "articles WikiExtractor": len(wx_articles),
              "passages ifqa": len(ours), "passages WikiExtractor": len(theirs),
              "identical passages (% of ifqa's, articles both kept)": 100 * identical / len(shared_passages),
              "mean word-level similarity per article (%)": 100 * sum(similarity) / len(similarity),
              "words ifqa": words_ours, "words WikiExtractor": words_theirs}
    notes = [f"only in ifqa's text, most frequent tokens: {only_ours.most_common(12)}",
             f"only in WikiExtractor's text, most frequent tokens: {only_theirs.most_common(12)}",
             f"articles only WikiExtractor kept: {[wx_articles[a][0] for a in sorted(set(wx_articles) - set(our_articles))][:10]}",
             f"articles only ifqa kept: {sorted(set(our_articles) - set(wx_articles))[:10]}"]
    return result, notes


def main() -> None:
    WORK.mkdir(parents=True, exist_ok=True)
    print(f"machine: {machine()}\n")
    rows = [throughput("wiki JSON (2015 sample + 2021 slice)", JSON_INPUTS, w) for w in (1, 2)]
    rows += [throughput("XML fragment (bz2)", [XML], w) for w in (1, 2)]
    print(markdown_table(rows), "\n")
    result, notes = side_by_side()
    print(markdown_table([result]), "\n")
    print("\n".join(f"- {note}" for note in notes), "\n")
    xml = rows[2]
    xml_mb = 6.1  # uncompressed XML of the fragment, per ../shared/data/README.md
    xml_rate = xml_mb / xml["seconds"]
    full_xml_mb = 22_000 * 4.4  # ~22 GB bz2 at ~4.4x compression (the fragment's ratio: 6.1 MB / 1.7 MB = 3.6; dumps run 4-5x)
    hours = full_xml_mb / (xml_rate * 16 * 0.85) / 3600
    print(f"projection: 1 worker cleans {xml_rate:.2f} MB/s of XML; a full dump (~{full_xml_mb / 1e3:.0f} GB of XML) "
          f"on 16 workers at 85% scaling takes about {hours:.1f} h (bz2 decompression in the reading process "
          f"must keep up: {16 * 0.85 * xml_rate:.0f} MB/s of XML)")


if __name__ == "__main__":
    main()
