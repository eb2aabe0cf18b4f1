"""MediaWiki dumps written by the tests (our own text, not Wikipedia's)."""

from __future__ import annotations

import bz2
from pathlib import Path
from xml.sax.saxutils import escape

import pytest

HEADER = (
    '<mediawiki xmlns="http://www.mediawiki.org/xml/export-0.10/" version="0.10" xml:lang="en">\n'
    "  <siteinfo><sitename>Wikipedia</sitename></siteinfo>\n"
)


def page(page_id: int, title: str, text: str, ns: int = 0, redirect: str | None = None, raw: bool = False) -> str:
    body = text if raw else escape(text)
    redirect_tag = f'    <redirect title="{escape(redirect)}" />\n' if redirect else ""
    return (
        f"  <page>\n    <title>{escape(title)}</title>\n    <ns>{ns}</ns>\n    <id>{page_id}</id>\n{redirect_tag}"
        f'    <revision>\n      <id>{page_id}00</id>\n      <text xml:space="preserve">{body}</text>\n    </revision>\n  </page>\n'
    )


def dump(pages: list[str], closed: bool = True) -> str:
    return HEADER + "".join(pages) + ("</mediawiki>\n" if closed else "")


def prose(n_words: int, seed: int = 0) -> str:
    vocabulary = "river stone valley harbour lantern orchard meadow signal copper falcon".split()
    return " ".join(f"{vocabulary[(i * 7 + seed) % len(vocabulary)]}{(i + seed) % 97}" for i in range(n_words))


ARTICLE = (
    "'''Glimmerton''' is a town{{citation needed|date=May 2020}} on the [[River Lune|Lune]]<ref>Atlas, p. 4.</ref>. "
    "It has 1,200 people.<!-- census -->\n"
    "[[File:Glimmerton.jpg|thumb|The [[market]] square]]\n"
    "== History ==\n"
    "Founded in 1190 by [[monk]]s &amp; traders.\n"
    '{| class="wikitable"\n|-\n| year || 1190\n|}\n'
    "== See also ==\n* [[Lune]]\n"
    "[[Category:Towns]]"
)


@pytest.fixture
def small_dump(tmp_path) -> Path:
    pages = [
        page(10, "Glimmerton", ARTICLE),
        page(11, "Glimmer Town", "#REDIRECT [[Glimmerton]]", redirect="Glimmerton"),
        page(12, "Glimmer (disambiguation)", "'''Glimmer''' may refer to:\n* [[Glimmerton]]\n{{disambiguation}}"),
        page(13, "Talk:Glimmerton", "Some talk.", ns=1),
        page(14, "Long river", prose(250)),
        page(15, "Only template", "{{Infobox}}"),
    ]
    path = tmp_path / "dump.xml"
    path.write_text(dump(pages))
    return path


def bz2_file(source: Path, target: Path, streams: int = 1, cuts: list[int] | None = None) -> Path:
    """``source`` compressed as ``streams`` equal bz2 streams, or cut at the byte offsets ``cuts``
    (as pbzip2 and lbzip2 write them: a stream may end anywhere, inside a page or a tag)."""
    data = source.read_bytes()
    if cuts is None:
        cuts = [i * (len(data) // streams) for i in range(1, streams)]
    bounds = [0, *cuts, len(data)]
    target.write_bytes(b"".join(bz2.compress(data[a:b]) for a, b in zip(bounds, bounds[1:])))
    return target


def wikipedia_multistream(source: Path, target: Path, pages_per_stream: int = 2) -> Path:
    """``source`` laid out like Wikipedia's multistream dumps: a stream for the header, one per
    ``pages_per_stream`` pages, one for the closing tag."""
    data = source.read_bytes()
    starts = [i for i in range(len(data)) if data.startswith(b"  <page>", i)]
    cuts = starts[::pages_per_stream] + ([data.rindex(b"</mediawiki>")] if b"</mediawiki>" in data else [])
    return bz2_file(source, target, cuts=cuts)
