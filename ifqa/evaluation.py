"""The scorer: EM/F1 for answers, recall@K for retrieval, breakdowns and significance.

Answer metrics follow the official SQuAD v1.1 script exactly (the paper's numbers were computed that
way); answer recall follows DPR's ``has_answer``. Gold-passage recall matches passages by text overlap
because IfQA's gold passages come from a 2022 dump that retrieved collections will not share ids with.
"""

from __future__ import annotations

import collections
import re
import string
import unicodedata
from dataclasses import dataclass
from typing import Any, Iterable, Mapping, Sequence

import regex

RECALL_DEPTHS = (1, 5, 10, 20, 50, 100)
QUESTION_WORDS = ("what", "who", "when", "which", "where", "how many/much", "other")
ANSWER_TYPES = ("entity", "number", "date", "other")

# --- SQuAD v1.1 answer metrics ---------------------------------------------------------------

_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCTUATION = set(string.punctuation)


def normalize_answer(text: str) -> str:
    """SQuAD v1.1 normalization: lowercase, drop ASCII punctuation, drop a/an/the, collapse spaces."""
    text = text.lower()
    text = "".join(ch for ch in text if ch not in _PUNCTUATION)
    text = _ARTICLES.sub(" ", text)
    return " ".join(text.split())


def exact_match(prediction: str, answer: str) -> float:
    return float(normalize_answer(prediction) == normalize_answer(answer))


def token_f1(prediction: str, answer: str) -> float:
    """SQuAD v1.1 token F1 (an empty prediction or answer scores 0, as in the official script)."""
    predicted = normalize_answer(prediction).split()
    reference = normalize_answer(answer).split()
    common = collections.Counter(predicted) & collections.Counter(reference)
    same = sum(common.values())
    if same == 0:
        return 0.0
    precision = same / len(predicted)
    recall = same / len(reference)
    return 2 * precision * recall / (precision + recall)


def best_over_answers(metric, prediction: str, answers: Sequence[str]) -> float:
    """The official script's ``metric_max_over_ground_truths``."""
    return max(metric(prediction, answer) for answer in answers)


# --- extra, clearly separate normalization ---------------------------------------------------

_NUMBER_WORDS = {
    word: str(value)
    for value, word in enumerate(
        "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen "
        "sixteen seventeen eighteen nineteen twenty".split()
    )
}


def normalize_lenient(text: str) -> str:
    """SQuAD normalization plus Unicode punctuation, accents, thousands separators and number words.

    Reported as ``em_lenient``, never in place of the official EM.
    """
    text = unicodedata.normalize("NFKD", text)
    text = "".join(ch for ch in text if not unicodedata.combining(ch))
    text = re.sub(r"(?<=\d),(?=\d{3}\b)", "", text)
    text = "".join(" " if unicodedata.category(ch).startswith("P") else ch for ch in text)
    words = [_NUMBER_WORDS.get(word, word) for word in normalize_answer(text).split()]
    return " ".join(words)


def lenient_match(prediction: str, answer: str) -> float:
    return float(normalize_lenient(prediction) == normalize_lenient(answer))


# --- DPR answer recall -----------------------------------------------------------------------

_DPR_TOKEN = regex.compile(r"[\p{L}\p{N}\p{M}]+|[^\p{Z}\p{C}]", flags=regex.IGNORECASE | regex.UNICODE | regex.MULTILINE)


def _dpr_tokens(text: str) -> list[str]:
    return [token.lower() for token in _DPR_TOKEN.findall(unicodedata.normalize("NFD", text))]


def has_answer(answers: Sequence[str], text: str) -> bool:
    """DPR's string-match rule: some answer's tokens occur contiguously in the passage's tokens."""
    tokens = _dpr_tokens(text)
    for answer in answers:
        needle = _dpr_tokens(answer)
        if not needle:
            continue
        width = len(needle)
        for start in range(len(tokens) - width + 1):
            if tokens[start : start + width] == needle:
                return True
    return False


# --- gold-passage recall ---------------------------------------------------------------------

#: Word n-gram size and the share of the smaller passage's n-grams that must be shared.
GOLD_NGRAM = 5
GOLD_THRESHOLD = 0.5


def _shingles(text: str) -> frozenset[str]:
    folded = unicodedata.normalize("NFKD", text.lower())
    words = "".join(ch if ch.isalnum() else " " for ch in folded).split()
    if len(words) < GOLD_NGRAM:
        return frozenset([" ".join(words)]) if words else frozenset()
    return frozenset(" ".join(words[i : i + GOLD_NGRAM]) for i in range(len(words) - GOLD_NGRAM + 1))


class GoldMatcher:
    """Decides whether a retrieved passage is one of a question's gold passages.

    Rule: lowercase, fold accents, treat every non-alphanumeric character as a space, take word
    5-grams; a passage matches a gold passage when the 5-grams they share are at least half of the
    smaller set. So whitespace, punctuation and case never matter, a revision with a few edited
    words still matches (each edit removes at most five 5-grams), and another passage of the same
    article, which shares at most a stock phrase or two, does not.
    """

    def __init__(self, gold_passages: Iterable[str]):
        self._gold = [shingles for shingles in map(_shingles, gold_passages) if shingles]

    def __bool__(self) -> bool:
        return bool(self._gold)

    def matches(self, text: str) -> bool:
        candidate = _shingles(text)
        if not candidate:
            return False
        for gold in self._gold:
            shared = len(candidate & gold)
            if shared and shared >= GOLD_THRESHOLD * min(len(candidate), len(gold)):
                return True
        return False


# --- question and answer categories -----------------------------------------------------------

_WH = [("how many/much", re.compile(r"\bhow (many|much)\b")), ("what", re.compile(r"\bwhat\b")),
       ("who", re.compile(r"\bwho(m|se)?\b")), ("when", re.compile(r"\bwhen\b")),
       ("which", re.compile(r"\bwhich\b")), ("where", re.compile(r"\bwhere\b"))]


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
    % "|".join(list(_NUMBER_WORDS) + ["thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety", "hundred"])
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
    if words and words[0][:1].isupper() and all(
        word[:1].isupper() or word[:1].isdigit() or word.lower() in _LOWER_WORDS for word in words
    ):
        return "entity"
    return "other"


# --- scoring predictions ---------------------------------------------------------------------


@dataclass
class QuestionScore:
    qid: str
    em: float
    f1: float
    em_lenient: float
    answered: bool


def score_predictions(examples: Sequence[Any], predictions: Mapping[str, str]) -> list[QuestionScore]:
    """Per-question scores over every example; a question without a prediction scores 0."""
    scores = []
    for example in examples:
        prediction = predictions.get(example.qid)
        if prediction is None:
            scores.append(QuestionScore(example.qid, 0.0, 0.0, 0.0, False))
            continue
        scores.append(
            QuestionScore(
                example.qid,
                best_over_answers(exact_match, prediction, example.answers),
                best_over_answers(token_f1, prediction, example.answers),
                best_over_answers(lenient_match, prediction, example.answers),
                True,
            )
        )
    return scores


def _percent(values: Sequence[float]) -> float:
    return 100.0 * sum(values) / len(values) if values else 0.0


def bootstrap_ci(values: Sequence[float], samples: int = 1000, seed: int = 0, level: float = 0.95) -> tuple[float, float]:
    """Percentile bootstrap interval of the mean, in percent (fixed seed: reruns print the same)."""
    import numpy as np

    data = np.asarray(values, dtype=float)
    if data.size == 0:
        return (0.0, 0.0)
    rng = np.random.default_rng(seed)
    means = data[rng.integers(0, data.size, size=(samples, data.size))].mean(axis=1)
    low, high = np.quantile(means, [(1 - level) / 2, 1 - (1 - level) / 2])
    return (round(100 * float(low), 2), round(100 * float(high), 2))


def paired_test(a: Sequence[float], b: Sequence[float], samples: int = 10000, seed: int = 0) -> dict[str, float]:
    """Paired permutation (sign-flip) test of mean(a) - mean(b), two-sided, plus a bootstrap CI.

    Each permutation swaps the two systems' scores on a random subset of questions.
    """
    import numpy as np

    diff = np.asarray(a, dtype=float) - np.asarray(b, dtype=float)
    observed = float(diff.mean()) if diff.size else 0.0
    rng = np.random.default_rng(seed)
    signs = rng.choice([-1.0, 1.0], size=(samples, diff.size))
    permuted = np.abs((signs * diff).mean(axis=1))
    p_value = (1 + int((permuted >= abs(observed) - 1e-12).sum())) / (samples + 1)
    low, high = bootstrap_ci(diff, seed=seed)
    return {"difference": round(100 * observed, 2), "p_value": round(p_value, 4), "ci95": [low, high]}


def summarize_predictions(
    examples: Sequence[Any], predictions: Mapping[str, str], compare: Mapping[str, str] | None = None
) -> dict[str, Any]:
    """The ``ifqa evaluate --predictions`` report: EM/F1 with CIs, breakdowns, optional paired test."""
    scores = score_predictions(examples, predictions)
    em = [score.em for score in scores]
    f1 = [score.f1 for score in scores]
    report: dict[str, Any] = {
        "n": len(scores),
        "answered": sum(score.answered for score in scores),
        "em": round(_percent(em), 2),
        "f1": round(_percent(f1), 2),
        "em_ci95": list(bootstrap_ci(em)),
        "f1_ci95": list(bootstrap_ci(f1)),
        "em_lenient": round(_percent([score.em_lenient for score in scores]), 2),
        "by_answer_type": _breakdown(examples, scores, lambda example: answer_type(example.answers[0]), ANSWER_TYPES),
        "by_question_word": _breakdown(examples, scores, lambda example: question_word(example.question), QUESTION_WORDS),
    }
    known = set(predictions)
    report["unknown_qids"] = len(known - {example.qid for example in examples})
    if compare is not None:
        other = score_predictions(examples, compare)
        report["compare"] = {
            "em": round(_percent([s.em for s in other]), 2),
            "f1": round(_percent([s.f1 for s in other]), 2),
            "em_difference": paired_test(em, [s.em for s in other]),
            "f1_difference": paired_test(f1, [s.f1 for s in other]),
        }
    return report


def _breakdown(examples, scores, key, order) -> dict[str, dict[str, float]]:
    groups: dict[str, list[QuestionScore]] = collections.defaultdict(list)
    for example, score in zip(examples, scores):
        groups[key(example)].append(score)
    return {
        name: {"n": len(groups[name]), "em": round(_percent([s.em for s in groups[name]]), 2),
               "f1": round(_percent([s.f1 for s in groups[name]]), 2)}
        for name in order
        if groups.get(name)
    }


# --- scoring retrieval runs ------------------------------------------------------------------


def flag_contexts(ctxs: list[dict[str, Any]], answers: Sequence[str], gold: GoldMatcher | None) -> None:
    """Fill ``has_answer`` and (when gold passages are known) ``gold`` on each retrieved passage.

    Like DPR, only the passage text is searched, not its title.
    """
    for ctx in ctxs:
        text = ctx.get("text") or ""
        ctx["has_answer"] = has_answer(answers, text)
        if gold:
            ctx["gold"] = gold.matches(text)


def recall_at(hits: Sequence[Sequence[bool]], depths: Iterable[int]) -> dict[str, float]:
    """Share of questions (percent) with at least one hit in the top K, for each K."""
    return {str(k): round(_percent([float(any(flags[:k])) for flags in hits]), 2) for k in depths}


def summarize_run(records: Sequence[Mapping[str, Any]], examples: Sequence[Any] | None = None) -> dict[str, Any]:
    """The ``ifqa evaluate --run`` report: recall@K (gold-passage and answer), by question word too.

    Flags stored in the run are used as they are; with ``examples`` they are recomputed from the
    questions' answers and gold passages (this is how a DPR or pyserini run is scored here).
    """
    by_qid = {example.qid: example for example in examples} if examples is not None else {}
    depth = max((len(record.get("ctxs", [])) for record in records), default=0)
    depths = [k for k in RECALL_DEPTHS if k < depth] + ([depth] if depth else [])  # always up to the run's depth
    answer_hits, gold_hits, words = [], [], []
    for record in records:
        ctxs = record.get("ctxs", [])
        example = by_qid.get(str(record.get("qid")))
        if example is not None:
            flag_contexts(ctxs, example.answers, GoldMatcher(example.context))
        elif any("has_answer" not in ctx for ctx in ctxs):
            flag_contexts(ctxs, record.get("answers") or [], None)
        answer_hits.append([bool(ctx.get("has_answer")) for ctx in ctxs])
        if all("gold" in ctx for ctx in ctxs):
            gold_hits.append([bool(ctx.get("gold")) for ctx in ctxs])
        words.append(question_word(record.get("question", "")))
    report: dict[str, Any] = {"n": len(records), "depth": depth, "recall": {}}
    if gold_hits and len(gold_hits) == len(records):
        report["recall"]["gold"] = recall_at(gold_hits, depths)
    report["recall"]["answer"] = recall_at(answer_hits, depths)
    k = 20 if 20 in depths else (depths[-1] if depths else 0)
    report["answer_recall_by_question_word"] = {
        name: {"n": sum(w == name for w in words),
               f"recall@{k}": round(_percent([float(any(h[:k])) for h, w in zip(answer_hits, words) if w == name]), 2)}
        for name in QUESTION_WORDS if name in words
    }
    return report
