"""Answer metrics: the official SQuAD v1.1 EM/F1 (what the paper reports) and a lenient EM beside it.

Kept identical to the field's script so numbers compare; the lenient variant is reported next to
EM, never in its place.
"""

from __future__ import annotations

import collections
import re
import string
import unicodedata
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

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


def contains_answer(prediction: str, answer: str) -> float:
    """Answer containment (FlashRAG's ``acc``, BERGEN's Match): the gold answer, normalized as for EM,
    occurs in the normalized prediction as whole words ("6" is not in "16 hours"); an answer that
    normalizes to nothing is contained nowhere."""
    gold = normalize_answer(answer)
    return float(bool(gold) and f" {gold} " in f" {normalize_answer(prediction)} ")


def best_over_answers(metric, prediction: str, answers: Sequence[str]) -> float:
    """The official script's ``metric_max_over_ground_truths``."""
    return max(metric(prediction, answer) for answer in answers)


# --- extra, clearly separate normalization ---------------------------------------------------

NUMBER_WORDS = {
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
    words = [NUMBER_WORDS.get(word, word) for word in normalize_answer(text).split()]
    return " ".join(words)


def lenient_match(prediction: str, answer: str) -> float:
    return float(normalize_lenient(prediction) == normalize_lenient(answer))


#: A reply that declines to answer, as a whole ("I don't know.", "I cannot answer that.", "Unknown.", "N/A",
#: "It is impossible to say."): an abstention, counted apart from answers. Anchored at both ends, so an
#: answer that starts alike is an answer ("Can't Speak French", "Unknown Soldier", "Who is Sylvia?").
_ABOUT = r"(?:\s+(?:that|this|it|for\s+sure|the\s+answer|(?:to\s+)?(?:this|that|the|your)\s+question|from\s+(?:the\s+)?passages?))*"
_NON_ANSWER = re.compile(
    r"^[\W_]*(?:i\s+(?:really\s+)?(?:do\s+not|don['’]?t|dont|did\s+not|didn['’]?t)\s+know"
    r"|i\s+(?:can\s*not|can['’]?t|could\s*n['’]?t|could\s+not|am\s+unable\s+to|['’]m\s+unable\s+to|am\s+not\s+able\s+to)\s+"
    r"(?:answer|say|tell|know|determine)"
    r"|(?:it\s+is\s+|it['’]s\s+)?(?:unknown|not\s+known|unclear|uncertain|impossible\s+to\s+(?:say|know|tell|determine))"
    r"|n\s*/\s*a|none\s+of\s+the\s+above|no\s+answer|(?:there\s+is\s+)?not\s+enough\s+information"
    r"|(?:it\s+)?cannot\s+be\s+(?:determined|answered))" + _ABOUT + r"[\W_]*$",
    re.I,
)


def is_non_answer(prediction: str) -> bool:
    """Whether ``prediction`` declines to answer (see ``_NON_ANSWER``): an abstention, not a wrong answer."""
    return bool(_NON_ANSWER.match(prediction))


@dataclass
class QuestionScore:
    qid: str
    em: float
    f1: float
    em_lenient: float
    answered: bool
    containment: float = 0.0
    abstained: bool = False  # a non-answer ("I don't know"): neither answered nor a wrong answer given


def score_predictions(examples: Sequence[Any], predictions: Mapping[str, str]) -> list[QuestionScore]:
    """Per-question scores over every example; a question without a prediction scores 0."""
    scores = []
    for example in examples:
        prediction = predictions.get(example.qid)
        if prediction is None:
            scores.append(QuestionScore(example.qid, 0.0, 0.0, 0.0, False))
            continue
        em, f1, lenient, contained = (
            best_over_answers(metric, prediction, example.answers)
            for metric in (exact_match, token_f1, lenient_match, contains_answer)
        )
        abstained = is_non_answer(prediction)
        scores.append(QuestionScore(example.qid, em, f1, lenient, not abstained, contained, abstained))
    return scores
