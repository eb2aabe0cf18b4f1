"""Whether a retrieved passage answers or is gold: DPR's ``has_answer`` and IfQA's gold-passage rule.

Gold passages come from a 2022 dump that retrieved collections do not share ids with, so they are
matched by text overlap (the rule is in ``GoldMatcher``). Also recall@K over flagged runs.
"""

from __future__ import annotations

import functools
import unicodedata
from collections.abc import Iterable, Sequence
from typing import Any

import regex

RECALL_DEPTHS = (1, 5, 10, 20, 50, 100)

_DPR_TOKEN = regex.compile(
    r"[\p{L}\p{N}\p{M}]+|[^\p{Z}\p{C}]", flags=regex.IGNORECASE | regex.UNICODE | regex.MULTILINE
)


def _dpr_tokens(text: str) -> list[str]:
    return [token.lower() for token in _DPR_TOKEN.findall(unicodedata.normalize("NFD", text))]


def answer_needles(answers: Sequence[str]) -> list[str]:
    """Each answer's tokens joined by spaces and framed by them (tokens never contain a space)."""
    return [f" {' '.join(tokens)} " for tokens in map(_dpr_tokens, answers) if tokens]


def has_answer(answers: Sequence[str], text: str, needles: Sequence[str] | None = None) -> bool:
    """DPR's string-match rule: some answer's tokens occur contiguously in the passage's tokens.

    Both sides are joined with single spaces, so a contiguous token match is a substring match
    of the framed needle (``answer_needles``, computed once per question by ``flag_contexts``).
    A needle one of whose tokens is not even a substring of the lowercased text cannot match, so
    most passages are settled without tokenizing them.
    """
    folded = _folded(text)
    needles = answer_needles(answers) if needles is None else needles
    if folded is not None:
        needles = [needle for needle in needles if all(token in folded for token in needle.split())]
        if not needles:
            return False
    haystack = _haystack(text)
    return any(needle in haystack for needle in needles)


@functools.lru_cache(maxsize=32768)
def _folded(text: str) -> str | None:
    """The text as tokens are lowercased (NFD, lowercase): every token is a substring of it. None
    where that fails: the only context-dependent lowercasing, Greek final sigma, can make a token
    lowercase differently from the same letters inside the whole text."""
    normalized = unicodedata.normalize("NFD", text)
    return None if "\u03a3" in normalized else normalized.lower()


@functools.lru_cache(maxsize=32768)
def _haystack(text: str) -> str:
    """A passage's tokens framed by spaces; cached, as half the passages of a run recur across questions."""
    return f" {' '.join(_dpr_tokens(text))} "


# --- gold-passage recall ---------------------------------------------------------------------

#: Word n-gram size and the share of the smaller passage's n-grams that must be shared.
GOLD_NGRAM = 5
GOLD_THRESHOLD = 0.5


class _Spaces(dict):
    """``str.translate`` table: a str.isalnum() character stays, any other becomes a space (filled
    on first sight, as the Unicode table is too large to build)."""

    def __missing__(self, code: int) -> int:
        self[code] = code if chr(code).isalnum() else 32
        return self[code]


_SPACES = _Spaces()


@functools.lru_cache(maxsize=4096)  # ~7 KB a passage: 32,768 of them held 0.2 GB of a k=100 run's memory
def _words(text: str) -> tuple[str, ...]:
    """The text's words: runs of str.isalnum() characters of its lowercased NFKD form."""
    return tuple(unicodedata.normalize("NFKD", text.lower()).translate(_SPACES).split())


@functools.lru_cache(maxsize=4096)
def _shingles(text: str) -> frozenset[tuple[str, ...]]:
    words = _words(text)
    if len(words) < GOLD_NGRAM:
        return frozenset([words]) if words else frozenset()
    return frozenset(zip(*(words[i:] for i in range(GOLD_NGRAM))))


def _vocabulary_windows(words: Sequence[str], vocabulary: frozenset[str]) -> int:
    """How many of the text's 5-word windows hold only ``vocabulary``'s words: at least as many as
    the 5-grams it can share with a passage of that vocabulary."""
    run = windows = 0
    for inside in map(vocabulary.__contains__, words):
        if inside:
            run += 1
            if run >= GOLD_NGRAM:
                windows += 1
        else:
            run = 0
    return windows


class GoldMatcher:
    """Decides whether a retrieved passage is one of a question's gold passages.

    Rule: lowercase, fold accents, treat every non-alphanumeric character as a space, take word
    5-grams; a passage matches a gold passage when the 5-grams they share are at least half of the
    smaller set. So whitespace, punctuation and case never matter, a revision with a few edited
    words still matches (each edit removes at most five 5-grams), and another passage of the same
    article, which shares at most a stock phrase or two, does not.
    """

    def __init__(self, gold_passages: Iterable[str]):
        self._gold = [(shingles, frozenset(_words(text))) for text in gold_passages if (shingles := _shingles(text))]

    def __bool__(self) -> bool:
        return bool(self._gold)

    def matches(self, text: str) -> bool:
        """The rule above, exactly; most passages are settled without building their 5-grams: the
        5-grams two passages share are at most the windows of this text made of the gold's words,
        and this text has at least (distinct words - 4) distinct 5-grams."""
        words = _words(text)
        if not words:
            return False
        least = 0  # a lower bound on the text's distinct 5-grams, counted when first needed
        candidate: frozenset | None = None
        for gold, vocabulary in self._gold:
            if len(words) >= GOLD_NGRAM:
                most_shared = _vocabulary_windows(words, vocabulary)
                if not most_shared:
                    continue
                least = least or max(1, len(set(words)) - (GOLD_NGRAM - 1))
                if most_shared < GOLD_THRESHOLD * min(least, len(gold)):
                    continue
            candidate = _shingles(text) if candidate is None else candidate
            shared = len(candidate & gold)
            if shared and shared >= GOLD_THRESHOLD * min(len(candidate), len(gold)):
                return True
        return False


def percent(values: Sequence[float]) -> float:
    """Mean of 0/1 (or fractional) values in percent; 0 for no values."""
    return 100.0 * sum(values) / len(values) if values else 0.0


def flag_contexts(ctxs: list[dict[str, Any]], answers: Sequence[str], gold: GoldMatcher | None) -> None:
    """Fill ``has_answer`` and (when gold passages are known) ``gold`` on each retrieved passage.

    Like DPR, only the passage text is searched, not its title.
    """
    needles = answer_needles(answers)
    for ctx in ctxs:
        text = ctx.get("text") or ""
        ctx["has_answer"] = has_answer(answers, text, needles)
        if gold:
            ctx["gold"] = gold.matches(text)


def run_record(example: Any, ctxs: list[dict[str, Any]], flagged_for: Any = None) -> dict[str, Any]:
    """A run line for a question (an ``Example``): its passages flagged with ``has_answer`` and ``gold``.

    ``flagged_for``: the run line the passages come from, made for this same question set (reranking
    only reorders them); where it holds the example's answers and every passage carries its flags,
    they are kept rather than computed again (the same values: they depend on the texts, answers and
    gold passages alone)."""
    if not (
        flagged_for is not None
        and flagged_for.get("answers") == example.answers
        and all("has_answer" in ctx and ("gold" in ctx or not example.context) for ctx in ctxs)
    ):
        flag_contexts(ctxs, example.answers, GoldMatcher(example.context))
    return {"qid": example.qid, "question": example.question, "answers": example.answers, "ctxs": ctxs}


def recall_at(hits: Sequence[Sequence[bool]], depths: Iterable[int]) -> dict[str, float]:
    """Share of questions (percent) with at least one hit in the top K, for each K."""
    return {str(k): round(percent([float(any(flags[:k])) for flags in hits]), 2) for k in depths}
