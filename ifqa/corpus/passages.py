"""Disjoint fixed-length passages, DPR style, and the two passage file layouts (JSONL, DPR TSV)."""

from __future__ import annotations

from json.encoder import encode_basestring as _json_string
from typing import NamedTuple

from ifqa.artifacts import TSV_FIELDS_HINT, TSV_HEADER  # noqa: F401 (the corpus builder's names for them)
from ifqa.errors import IfqaError

DEFAULT_WORDS = 100


class Passage(NamedTuple):
    id: str
    title: str
    text: str

    def to_line(self, tsv: bool) -> str:
        """One output line: DPR's ``id\\ttext\\ttitle`` or a JSON object ``{"id","title","text"}``."""
        if tsv:
            if "\t" in self.id or "\n" in self.id:
                raise IfqaError(
                    f"passage id {self.id!r} holds a tab or a line break, which DPR's TSV cannot; "
                    "write JSONL (an output name not ending in .tsv)"
                )
            return f"{self.id}\t{' '.join(self.text.split())}\t{' '.join(self.title.split())}\n"
        # the bytes json.dumps(..., ensure_ascii=False) writes, without its per-call set-up (a third of the time)
        return f'{{"id": {_json_string(self.id)}, "title": {_json_string(self.title)}, "text": {_json_string(self.text)}}}\n'


def split_passages(article_id: str, title: str, text: str, words: int = DEFAULT_WORDS) -> list[Passage]:
    """Cut an article into passages of ``words`` whitespace-separated words (the last one shorter).

    Ids are ``<article id>-<n>``: stable across reruns and worker counts, unique across articles.
    """
    tokens = text.split()
    return [
        Passage(f"{article_id}-{n}", title, " ".join(tokens[start : start + words]))
        for n, start in enumerate(range(0, len(tokens), words))
    ]
