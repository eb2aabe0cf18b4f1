"""Question and answer categories for breakdowns: the main clause's wh-word and a heuristic answer type."""

from __future__ import annotations

import re

from ifqa.eval.answers import NUMBER_WORDS

QUESTION_WORDS = ("what", "who", "when", "which", "where", "how many/much", "other")
ANSWER_TYPES = ("entity", "number", "date", "other")

_WH = [
    ("how many/much", re.compile(r"\bhow (many|much)\b")),
    ("what", re.compile(r"\bwhat\b")),
    ("who", re.compile(r"\bwho(m|se)?\b")),
    ("when", re.compile(r"\bwhen\b")),
    ("which", re.compile(r"\bwhich\b")),
    ("where", re.compile(r"\bwhere\b")),
]


def question_word(question: str) -> str:
    """The wh-word of the main clause: searched after the first comma (past the "If ..." premise),
    then in the whole question; the earliest match wins."""
    lowered = question.lower()
    clauses = [lowered.split(",", 1)[1]] if "," in lowered else []
    for text in clauses + [lowered]:
        found = [(match.start(), name) for name, pattern in _WH for match in [pattern.search(text)] if match]
        if found:
            return min(found)[1]
    return "other"


_MONTHS = "january february march april may june july august september october november december"
_DATE = re.compile(
    r"^(?:(?:\d{1,2}(?:st|nd|rd|th)? )?(?:%s)(?: \d{1,2}(?:st|nd|rd|th)?)?,? ?(?:\d{3,4})?|\d{3,4}s?|"
    r"\d{1,2}(?:st|nd|rd|th) century|\d{1,2}[/-]\d{1,2}[/-]\d{2,4}|\d{4}-\d{2}-\d{2})(?: (?:bc|bce|ad|ce))?$"
    % "|".join(_MONTHS.split())
)
_NUMBER = re.compile(
    r"^[$€£]?(?:\d[\d,]*(?:\.\d+)?|\.\d+|%s)(?:%%| ?(?:percent|million|billion|thousand|hundred))?(?: [a-z%%$]+){0,2}$"
    % "|".join(list(NUMBER_WORDS) + ["thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety", "hundred"])
)
_LOWER_WORDS = {"of", "the", "and", "de", "in", "on", "for", "a", "an", "to", "von", "van", "la", "le", "du", "del"}


def answer_type(answer: str) -> str:
    """A heuristic type for the first reference answer.

    date: a year (3–4 digits, optionally a decade "1990s"), a month with optional day/year, a
    century, or a numeric date; number: a number (digits, decimals, thousands commas, currency, %,
    number words) followed by at most two unit words ("2 hours"); entity: every word capitalized
    except short function words ("Bank of England"); other: anything else.
    """
    text = answer.strip()
    lowered = " ".join(text.lower().split())
    if _DATE.match(lowered):
        return "date"
    if _NUMBER.match(lowered):
        return "number"
    words = [word for word in re.split(r"[\s\-]+", text) if word]
    if (
        words
        and words[0][:1].isupper()
        and all(word[:1].isupper() or word[:1].isdigit() or word.lower() in _LOWER_WORDS for word in words)
    ):
        return "entity"
    return "other"
