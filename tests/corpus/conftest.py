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
        f"    <revision>\n      <id>{page_id}00</id>\n      <text xml:space=\"preserve\">{body}</text>\n    </revision>\n  </page>\n"
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
    "{| class=\"wikitable\"\n|-\n| year || 1190\n|}\n"
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


def bz2_file(source: Path, target: Path, streams: int = 1) -> Path:
    data = source.read_bytes()
    cut = len(data) // streams
    pieces = [data[i * cut : (i + 1) * cut if i < streams - 1 else len(data)] for i in range(streams)]
    target.write_bytes(b"".join(bz2.compress(piece) for piece in pieces))
    return target
