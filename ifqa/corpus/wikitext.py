"""MediaWiki markup -> plain prose, close to what WikiExtractor keeps.

What survives: prose, link texts and section headings ("History."). Templates, tables,
references, files and images, categories, comments, math and list items ("*", "#", ";") are
dropped, as WikiExtractor does by default; ":"-indented lines (quotations) are kept, italics
become quotes.

Why patterns and linear scans instead of a parser: nothing that is dropped needs to be
understood, only delimited, and what is kept is flat text with links and inline markup. A full
parse (mwparserfromhell, the previous implementation) spent three times the whole budget of the
passage builder building trees for markup that is then thrown away; this module does the same
job as a fixed sequence of passes, each a compiled pattern or a linear scan, and took 0.14 s where
the parser took 1.04 s on the 111 articles of the dump fragments, agreeing on 99.99% of their words.
"""

from __future__ import annotations

import html
import re

_DROPPED_NAMESPACES = set(
    "file image category media wikipedia wp template help portal special user talk module draft wikt wiktionary "
    "s q commons".split()
)
_INTERWIKI = re.compile(r"[a-z]{2,3}(?:-[a-z]+)?:(?! )")  # "de:Foo", not "Ali: Fear Eats the Soul"
_DISAMBIGUATION = re.compile(
    r"\{\{\s*(?:disambiguation|disambig|dab|disamb|hndis|geodis|numberdis|letter-numbercombdisambig|"
    r"[^{}|]*\bdisambiguation)\s*(?:\||\}\})",
    re.IGNORECASE,
)


def is_disambiguation(title: str, wikitext: str) -> bool:
    """A page is a disambiguation page when its title says so or it carries a disambiguation template."""
    return title.endswith("(disambiguation)") or bool(_DISAMBIGUATION.search(wikitext))


# --- passes that remove whole constructs ---------------------------------------------------------

_MAGIC_WORDS = re.compile(r"__[A-Z]+__")
_COMMENT = re.compile(r"<!--.*?(?:-->|$)", re.DOTALL)
#: Tags whose content is not prose (braces in LaTeX are not templates, so these go before templates).
_DROPPED_ELEMENTS = re.compile(
    r"<(ref|references|math|chem|ce|syntaxhighlight|source|pre|score|timeline|hiero|graph|mapframe|templatedata|"
    r"gallery|imagemap|table|inputbox|categorytree|noinclude|maplink|phonos)\b[^>]*?(?:/>|>.*?</\1\s*>)",
    re.IGNORECASE | re.DOTALL,
)
#: ``<nowiki>`` content is literal: its markup characters become entities until the end.
_NOWIKI = re.compile(r"<nowiki\s*>(.*?)</nowiki\s*>", re.IGNORECASE | re.DOTALL)
_MARKUP_AS_ENTITIES = str.maketrans({c: f"&#{ord(c)};" for c in "[]{}'<>|=_"})  # not "&#;": entities stay entities
#: An HTML list item or definition term opens a list line (it may be left unclosed); its end, the
#: list's end or a definition starts a new line.
_LIST_ITEM = re.compile(r"<(?:li|dt)\b[^>]*>", re.IGNORECASE)
_LIST_BREAK = re.compile(r"</(?:li|dt|ul|ol|dl)\s*>|<dd\b[^>]*>", re.IGNORECASE)
#: "\n" rather than "^" (MULTILINE): a literal first character is five times faster to scan for.
_BLOCK_TOKEN = re.compile(r"\{\{|\}\}|\n[ \t]*\{\||\n[ \t]*\|\}")


def strip_blocks(text: str) -> str:
    """Remove templates ``{{...}}`` and tables ``{| ... |}`` (nested either way) in one linear scan.

    Unbalanced closers are ignored, and an unclosed opener drops the rest of the text, as a parser
    would keep it inside that node.
    """
    if "{" not in text:
        return text
    text = "\n" + text  # a table may open the text
    out, stack, last = [], [], 0
    for match in _BLOCK_TOKEN.finditer(text):
        token = match.group().strip()
        if token in ("{{", "{|"):
            if not stack:
                out.append(text[last : match.start() + (token == "{|")])  # a table keeps the newline before it
            stack.append(token)
        elif token == "|}" and stack and stack[-1] == "{{" and text.startswith("}", match.end()):
            stack.pop()  # "\n|}}" inside a template: an empty last parameter, then the template's "}}"
            if not stack:
                last = match.end() + 1
        elif stack and stack[-1] == ("{{" if token == "}}" else "{|"):
            stack.pop()
            if not stack:
                last = match.end()
    if not stack:
        out.append(text[last:])
    return "".join(out)[1:]


# --- passes that keep the text of a construct ----------------------------------------------------

#: ``[url text]`` keeps its text, a bare ``[url]`` or a free-standing URL goes.
_EXTERNAL_LINK = re.compile(r"\[(?:https?:|ftp:|mailto:|//)[^\s\[\]]*(?:[ \t]+([^\[\]\n]*))?\]", re.IGNORECASE)
#: http(s), ftp(s) (no IGNORECASE: five times faster); punctuation that ends a sentence is not the URL's.
_BARE_URL = re.compile(r"[hHfF][tT][tTpP][pP]?[sS]?://[^\s\[\]<>\"{}|]*[^\s\[\]<>\"{}|.,;:!?')]")
#: An innermost ``[[target|text]]``: captions holding links are reduced from the inside out.
_WIKILINK = re.compile(
    r"\[\[([^\[\]|\n]*)(?:\|([^\[\]]*(?:(?:\[(?!\[)|\](?!\]))[^\[\]]*)*))?\]\]"
)  # text may hold single brackets
_BOLD_ITALIC = re.compile(r"'''''(.+?)'''''")
_BOLD = re.compile(r"'''(.+?)'''")
_ITALIC = re.compile(r"''(.+?)''")
_BREAK = re.compile(r"<br\s*/?>|</br>", re.IGNORECASE)
#: Inline HTML and extension tags wikitext allows: the markup goes, the content stays. Other
#: ``<...>`` is text ("x<y and y>z").
_TAG = re.compile(
    r"</?(?:span|div|small|big|sup|sub|center|font|u|s|del|ins|strike|b|i|em|strong|tt|code|var|kbd|samp|abbr|"
    r"cite|q|blockquote|poem|nowiki|p|dfn|bdi|bdo|mark|time|wbr|ruby|rb|rp|rt|rtc|data|caption|ol|ul|li|dl|dt|dd|"
    r"h[1-6]|section|onlyinclude|includeonly|indicator|templatestyles|hr|tr|td|th|tbody|thead|tfoot)\b[^<>]*>",
    re.IGNORECASE,
)
_HEADING_LINE = re.compile(r"(={1,6}) *(.+?) *(={1,6})")
_EMPTY_PARENS = re.compile(r"\([^\S\n]*(?:[,;:][^\S\n]*)*\)")
_SPACE_BEFORE_PUNCT = re.compile(r" (?=[,.;:!?])")
_SPACES = re.compile("  +")


def _link_text(match: re.Match) -> str:
    target, text = match.group(1), match.group(2)
    if ":" in target and not target.lstrip().startswith(":"):  # [[:Category:X|x]] is a visible link
        lowered = target.strip().lower()
        if lowered.split(":", 1)[0].strip() in _DROPPED_NAMESPACES or _INTERWIKI.match(lowered):
            return ""
    if text is not None:
        return text
    target = target.strip()
    if target.startswith("#"):
        return target[1:]
    return target.lstrip(":").split("#", 1)[0]


def render(wikitext: str) -> str:
    """Inline markup resolved, line structure kept: headings, lists and indents are ``clean``'s to judge."""
    if "<nowiki" in wikitext:
        wikitext = _NOWIKI.sub(lambda m: m.group(1).translate(_MARKUP_AS_ENTITIES), wikitext)
    text = _COMMENT.sub("", _MAGIC_WORDS.sub("", wikitext))
    text = strip_blocks(_DROPPED_ELEMENTS.sub("", text))
    if "''" in text:  # before links, as MediaWiki does: ''[[a|b]]'' must not lose its pair with the link
        text = _ITALIC.sub(r'"\1"', _BOLD.sub(r"\1", _BOLD_ITALIC.sub(r'"\1"', text)))
        text = text.replace("''", "")  # unbalanced quotes
    if "[" in text:
        text = _EXTERNAL_LINK.sub(lambda m: m.group(1) or "", text)
        while "[[" in text:
            reduced = _WIKILINK.sub(_link_text, text)
            if reduced == text:
                break
            text = reduced
    if "://" in text:
        text = _BARE_URL.sub("", text)
    if "<" in text:
        text = _TAG.sub("", _LIST_BREAK.sub("\n", _LIST_ITEM.sub("\n*", _BREAK.sub(" ", text))))
    if "&" in text:
        text = html.unescape(text)
    return _tidy(text)


def _tidy(text: str) -> str:
    """Whitespace and punctuation left by removed markup, line by line (no pattern crosses a newline)."""
    text = text.replace("\t", " ").replace("\u00a0", " ")  # str.replace: far faster than a regex
    if "(" in text:
        text = _EMPTY_PARENS.sub("", text)  # spaces inside are its own to match: one collapse pass after it
    return _SPACE_BEFORE_PUNCT.sub("", _SPACES.sub(" ", text))


def clean(wikitext: str) -> str:
    """Clean prose with one paragraph per line; a section heading becomes a short line "Heading."

    A heading is kept only when prose follows it before the next heading of the same or a higher
    level, so that "References" or "See also" sections, emptied of their lists, leave nothing.
    """
    paragraphs: list[str] = []
    pending: list[tuple[int, str]] = []  # headings not yet followed by prose
    for line in render(wikitext).split("\n"):
        line = line.strip()
        if line[:1] == ":":  # an indented quotation: the text stays
            line = line.lstrip(": ")
        elif line[:4] == "----":  # a horizontal rule
            line = line.lstrip("-").lstrip()
        if not line or line[0] in "|!*#;":  # list items, table rows left over
            continue
        if line[0] == "=" and (heading := _HEADING_LINE.fullmatch(line)):
            opening, title, closing = heading.groups()  # unbalanced signs stay in the title, as in MediaWiki
            level = min(len(opening), len(closing))
            title = (opening[level:] + title + closing[level:]).strip()
            pending = [(lvl, text) for lvl, text in pending if lvl < level]
            if title:
                pending.append((level, title if title[-1] in ".?!" else title + "."))
            continue
        paragraphs.extend(text for _, text in pending)
        pending = []
        paragraphs.append(line)
    return "\n".join(paragraphs)
