"""A synthetic multistream dump of any size, made of a real dump fragment's pages.

    python benchmarks/synthetic_multistream.py FRAGMENT.xml.bz2 OUT.xml.bz2 --copies 50

Wikipedia's ``pages-articles-multistream.xml.bz2`` is a series of independent bz2 streams: the
first holds the ``<siteinfo>`` header, then one stream per 100 pages, and the last one closes
``</mediawiki>``; ``...-index.txt.bz2`` beside it lists ``offset:page id:title`` per page. This
script writes the same layout from ``--copies`` copies of the fragment's pages (page ids shifted and
titles numbered per copy so that every page is distinct), so that throughput and decompression can
be measured at a few hundred MB where the real fragment is 6 MB.
"""

from __future__ import annotations

import bz2
import re
from pathlib import Path

from common import Parser

PAGES_PER_STREAM = 100
_PAGE = re.compile(rb"<page>.*?</page>\s*", re.DOTALL)
_PAGE_ID = re.compile(rb"(<page>.*?<id>)(\d+)(</id>)", re.DOTALL)
_TITLE = re.compile(rb"<title>(.*?)</title>")


def write_multistream(fragment: Path, output: Path, copies: int) -> dict:
    """Write the dump and its index; return its sizes."""
    xml = bz2.decompress(fragment.read_bytes())
    first = xml.index(b"<page>")
    header, footer = xml[:first], b"</mediawiki>\n"
    pages = _PAGE.findall(xml)
    id_step = 10 ** len(str(max(int(_PAGE_ID.search(p).group(2)) for p in pages)))
    index_lines: list[bytes] = []
    xml_bytes = len(header) + len(footer)
    with open(output, "wb") as out:
        out.write(bz2.compress(header))
        stream: list[bytes] = []
        stream_ids: list[tuple[int, bytes]] = []

        def flush() -> None:
            offset = out.tell()
            out.write(bz2.compress(b"".join(stream)))
            index_lines.extend(b"%d:%d:%s" % (offset, page_id, title) for page_id, title in stream_ids)
            stream.clear()
            stream_ids.clear()

        for copy in range(copies):
            for page in pages:
                page_id = int(_PAGE_ID.search(page).group(2)) + copy * id_step
                page = _PAGE_ID.sub(lambda m: m.group(1) + b"%d" % page_id + m.group(3), page, count=1)  # noqa: B023 - called at once
                if copy:
                    page = _TITLE.sub(lambda m: b"<title>%s (%d)</title>" % (m.group(1), copy), page, count=1)  # noqa: B023
                stream.append(page)
                stream_ids.append((page_id, _TITLE.search(page).group(1)))
                xml_bytes += len(page)
                if len(stream) == PAGES_PER_STREAM:
                    flush()
        if stream:
            flush()
        out.write(bz2.compress(footer))
    index = output.with_name(output.name.replace(".xml.bz2", "-index.txt.bz2"))
    index.write_bytes(bz2.compress(b"\n".join(index_lines) + b"\n"))
    return {"pages": copies * len(pages), "xml MB": xml_bytes / 1e6, "bz2 MB": output.stat().st_size / 1e6}


def main() -> None:
    parser = Parser(description=__doc__.split("\n\n")[0])
    parser.add_argument("fragment", input_file=True)
    parser.add_argument("output", type=Path)
    parser.add_argument("--copies", type=int, default=50)
    args = parser.parse_args()
    print(write_multistream(args.fragment, args.output, args.copies))


if __name__ == "__main__":
    main()
