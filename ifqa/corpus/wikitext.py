"""MediaWiki markup -> plain prose, close to what WikiExtractor keeps.

mwparserfromhell (a C tokenizer, maintained by the Earwig/Wikimedia community) builds the node tree;
this module decides what survives: prose, link texts and section headings ("History."). Templates,
tables, references, files and images, categories, comments, math and list items ("*", "#", ";")
are dropped, as WikiExtractor does by default; ":"-indented lines (quotations) are kept.
"""

from __future__ import annotations

import re

import mwparserfromhell
from mwparserfromhell import nodes

#: Tags whose content is not prose.
_DROPPED_TAGS = {
    "ref", "references", "table", "math", "chem", "gallery", "imagemap", "timeline", "score", "graph",
    "syntaxhighlight", "source", "pre", "hiero", "templatedata", "noinclude", "mapframe", "inputbox",
    "categorytree",
}
_LIST_TAGS = {"li", "dt"}  # "*", "#" and ";" items go; ":" lines (quotations, definitions) stay, as in WikiExtractor
_DROPPED_NAMESPACES = {"file", "image", "category", "media", "wikipedia", "wp", "template", "help", "portal",
                       "special", "user", "talk", "module", "draft", "wikt", "wiktionary", "s", "q", "commons"}
_INTERWIKI = re.compile(r"^:?[a-z]{2,3}(-[a-z]+)?:")
_LIST_LINE = "\x01"
_HEADING = "\x02"
_DISAMBIGUATION = re.compile(
    r"\{\{\s*(?:disambiguation|disambig|dab|disamb|hndis|geodis|numberdis|letter-numbercombdisambig|"
    r"[^{}|]*\bdisambiguation)\s*(?:\||\}\})",
    re.IGNORECASE,
)
_MAGIC_WORDS = re.compile(r"__[A-Z]+__")
_EMPTY_PARENS = re.compile(r"\(\s*(?:[,;:]\s*)*\)")
_SPACE_BEFORE_PUNCT = re.compile(r" +([,.;:!?])")
_SPACES = re.compile(r"[ \t\u00a0]+")


def is_disambiguation(title: str, wikitext: str) -> bool:
    """A page is a disambiguation page when its title says so or it carries a disambiguation template."""
    return title.endswith("(disambiguation)") or bool(_DISAMBIGUATION.search(wikitext))


_RAW_CONTENT = re.compile(
    r"<(math|chem|ce|syntaxhighlight|source|pre|score|timeline|hiero|graph|mapframe|templatedata)\b[^>]*?(?:/>|>.*?</\1\s*>)",
    re.IGNORECASE | re.DOTALL,
)
_REF = re.compile(r"<ref\b[^>]*/>|<ref\b[^>]*>.*?</ref\s*>", re.IGNORECASE | re.DOTALL)
_COMMENT = re.compile(r"<!--.*?(?:-->|$)", re.DOTALL)
_BLOCK_TOKEN = re.compile(r"\{\{|\}\}|^[ \t]*\{\||^[ \t]*\|\}", re.MULTILINE)


def strip_blocks(text: str) -> str:
    """Remove templates ``{{...}}`` and tables ``{| ... |}`` (nested either way) in one linear scan.

    They are dropped from the output anyway; cutting them before parsing spares mwparserfromhell
    building their trees, most of its time on real articles. Unbalanced closers are ignored, and
    an unclosed opener drops the rest of the text, as a parser would keep it inside that node.
    """
    out, stack, last = [], [], 0
    for match in _BLOCK_TOKEN.finditer(text):
        token = match.group().strip()
        if token in ("{{", "{|"):
            if not stack:
                out.append(text[last : match.start()])
            stack.append(token)
        elif stack and stack[-1] == ("{{" if token == "}}" else "{|"):
            stack.pop()
            if not stack:
                last = match.end()
    if not stack:
        out.append(text[last:])
    return "".join(out)


def clean(wikitext: str) -> str:
    """Clean prose with one paragraph per line; a section heading becomes a short line "Heading."

    A heading is kept only when prose follows it before the next heading of the same or a higher
    level, so that "References" or "See also" sections, emptied of their lists, leave nothing.
    """
    text = _RAW_CONTENT.sub("", _COMMENT.sub("", _MAGIC_WORDS.sub("", wikitext)))  # braces in LaTeX are not templates
    text = strip_blocks(_REF.sub("", text))
    tree = mwparserfromhell.parse(text, skip_style_tags=False)
    rendered = _render(tree.nodes)
    paragraphs: list[str] = []
    pending: list[tuple[int, str]] = []  # headings not yet followed by prose
    for raw_line in rendered.split("\n"):
        if raw_line.startswith(_HEADING):
            level, title = int(raw_line[1]), raw_line[2:].strip()
            pending = [(lvl, text) for lvl, text in pending if lvl < level]
            if title:
                pending.append((level, title if title[-1] in ".?!" else title + "."))
            continue
        line = _tidy(raw_line)
        if not line or line.startswith((_LIST_LINE, "*", "#", ";", "|", "{|", "!")):
            continue
        paragraphs.extend(text for _, text in pending)
        pending = []
        paragraphs.append(line)
    return "\n".join(paragraphs)


def _tidy(line: str) -> str:
    line = _SPACES.sub(" ", line)
    line = _EMPTY_PARENS.sub("", line)
    line = _SPACE_BEFORE_PUNCT.sub(r"\1", line)
    return _SPACES.sub(" ", line).strip()


def _render(node_list) -> str:
    return "".join(_render_node(node) for node in node_list)


def _render_node(node) -> str:
    if isinstance(node, nodes.Text):
        return str(node.value)
    if isinstance(node, nodes.Wikilink):
        return _render_link(node)
    if isinstance(node, nodes.Tag):
        return _render_tag(node)
    if isinstance(node, nodes.Heading):
        title = _tidy(_render(node.title.nodes).replace("\n", " "))
        return f"\n{_HEADING}{min(node.level, 9)}{title}\n"
    if isinstance(node, nodes.HTMLEntity):
        try:
            return node.normalize()
        except (ValueError, OverflowError):
            return " "
    if isinstance(node, nodes.ExternalLink):
        return _render(node.title.nodes) if node.title is not None else ""
    # Templates, comments, template arguments: not prose.
    return ""


def _render_link(link) -> str:
    target = str(link.title).strip()
    prefix = target.split(":", 1)[0].strip().lower().lstrip(":") if ":" in target else ""
    if prefix in _DROPPED_NAMESPACES or (_INTERWIKI.match(target.lower()) and not target.startswith(":")):
        return ""
    if link.text is not None:
        return _render(link.text.nodes)
    return target.lstrip(":").split("#", 1)[0] if not target.startswith("#") else target[1:]


def _render_tag(tag) -> str:
    name = str(tag.tag).strip().lower()
    if name in _LIST_TAGS:
        return _LIST_LINE
    if name in ("br", "hr"):
        return " " if name == "br" else "\n"
    if name in _DROPPED_TAGS or tag.contents is None:
        return ""
    if name == "i" and tag.wiki_markup == "''":
        return f'"{_render(tag.contents.nodes)}"'  # italics become quotes, as WikiExtractor writes them
    return _render(tag.contents.nodes)
