import collections
import json
import re
import string

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ifqa.artifacts import Example
from ifqa.datasets.demo import load_demo
from ifqa.datasets.demo import packaged_passages as passages_path
from ifqa.eval import answers as answer_metrics
from ifqa.eval import categories, significance, summary
from ifqa.eval import passages as passage_rules
from ifqa.io import read_jsonl


# An independent transcription of the official SQuAD v1.1 evaluate-v1.1.py rules, kept separate from
# ifqa.eval.answers on purpose: the scorer must agree with it on every case.
def squad_normalize(s):
    s = s.lower()
    s = "".join(ch for ch in s if ch not in set(string.punctuation))
    s = re.sub(r"\b(a|an|the)\b", " ", s)
    return " ".join(s.split())


def squad_f1(prediction, truth):
    p, t = squad_normalize(prediction).split(), squad_normalize(truth).split()
    same = sum((collections.Counter(p) & collections.Counter(t)).values())
    if same == 0:
        return 0
    precision, recall = same / len(p), same / len(t)
    return 2 * precision * recall / (precision + recall)


def squad_scores(examples, predictions):
    em = f1 = 0.0
    for example in examples:
        if example.qid not in predictions:
            continue
        pred = predictions[example.qid]
        em += max(float(squad_normalize(pred) == squad_normalize(a)) for a in example.answers)
        f1 += max(squad_f1(pred, a) for a in example.answers)
    return 100 * em / len(examples), 100 * f1 / len(examples)


HAND = [
    # prediction, answers, EM, F1 (worked out by hand from the SQuAD v1.1 rules)
    ("The Eiffel Tower", ["eiffel tower"], 1, 1.0),
    ("1,000", ["1000"], 1, 1.0),  # ASCII commas are punctuation: dropped
    ("São Paulo", ["Sao Paulo"], 0, 0.5),  # no accent folding
    ("\u201cHello\u201d", ["hello"], 0, 0.0),  # curly quotes are not string.punctuation
    ("May 5, 1990", ["5 May 1990"], 0, 1.0),  # same tokens, other order
    ("", ["Paris"], 0, 0.0),
    ("17", ["17th", "17", "seventeenth"], 1, 1.0),
    ("the 17th president", ["17th", "seventeenth"], 0, 2 / 3),
    ("twenty-one", ["twenty one"], 0, 0.0),
    ("an apple a day", ["Apple day"], 1, 1.0),
]


@pytest.mark.parametrize("prediction, answers, em, f1", HAND)
def test_hand_computed_cases(prediction, answers, em, f1):
    assert answer_metrics.best_over_answers(answer_metrics.exact_match, prediction, answers) == em
    assert answer_metrics.best_over_answers(answer_metrics.token_f1, prediction, answers) == pytest.approx(f1)


def test_report_equals_independent_squad_implementation():
    examples = [Example(str(i), "q?", answers) for i, (_, answers, _, _) in enumerate(HAND)]
    examples.append(Example("missing", "q?", ["x"]))  # no prediction: scores 0
    predictions = {str(i): prediction for i, (prediction, _, _, _) in enumerate(HAND)}
    report = summary.summarize_predictions(examples, predictions)
    em, f1 = squad_scores(examples, predictions)
    assert report["em"] == round(em, 2) and report["f1"] == round(f1, 2)
    assert report["n"] == 11 and report["answered"] == 10
    assert report["em"] == round(100 * 4 / 11, 2)


def test_lenient_normalization_is_a_separate_metric():
    examples = [Example("0", "q?", ["hello"]), Example("1", "q?", ["1000"]), Example("2", "q?", ["3"])]
    report = summary.summarize_predictions(examples, {"0": "\u201cHello\u201d", "1": "1,000", "2": "three"})
    assert report["em"] == round(100 / 3, 2)
    assert report["em_lenient"] == 100.0


def test_has_answer_is_whole_token_and_case_insensitive():
    assert passage_rules.has_answer(["1,000"], "It has 1,000 people.")
    assert passage_rules.has_answer(["paris"], "He lived in PARIS.")
    assert not passage_rules.has_answer(["Paris"], "a Parisian café")
    assert passage_rules.has_answer(["São Paulo"], "born in são paulo, brazil")
    assert passage_rules.has_answer(["nope", "New York"], "from New  York")
    assert not passage_rules.has_answer([""], "anything")


def test_has_answer_shortcut_agrees_with_tokenizing_everything():
    """DPR's rule written out (tokenize both sides, look for the answer's tokens in a row) against
    has_answer, whose shortcut skips tokenizing texts that lack an answer token as a substring."""

    def by_tokens(answers, text):
        tokens = passage_rules._dpr_tokens(text)
        for answer in map(passage_rules._dpr_tokens, answers):
            if answer and any(tokens[i : i + len(answer)] == answer for i in range(len(tokens) - len(answer) + 1)):
                return True
        return False

    texts = [
        "He lived in PARIS.",
        "ΟΔΟΣ.",
        "x.Σ y",
        "ὈΔΥΣΣΕΎΣ ἦλθε",
        "İstanbul's İZMİR",
        "café CAFÉ cafe\u0301",
        "straße STRASSE",
        "ﬁnance ﬁ",
        "１２３ 123",
        "a—b",
        "New\u00a0York",
        "Ǆ ǅ ǆ",
        "ΣΑΣ σας",
    ]
    answers = [
        ["paris"],
        ["οδος"],
        ["οδοσ"],
        ["σ"],
        ["ς"],
        ["y"],
        ["οδυσσευσ"],
        ["οδυσσεύς"],
        ["istanbul"],
        ["i̇stanbul"],
        ["izmir"],
        ["café"],
        ["cafe"],
        ["straße"],
        ["strasse"],
        ["finance"],
        ["ﬁ"],
        ["123"],
        ["b"],
        ["new york"],
        ["ǆ"],
        ["σας"],
        ["ςας"],
    ]
    for text in texts:
        for answer in answers:
            assert passage_rules.has_answer(answer, text) == by_tokens(answer, text), (answer, text)


def _demo_passages():
    return [record for _, record in read_jsonl(passages_path())]


def test_gold_matcher_accepts_copies_and_revisions():
    gold = load_demo("dev")[0].context[0]
    matcher = passage_rules.GoldMatcher([gold])
    assert matcher.matches(gold)
    assert matcher.matches("  " + gold.upper().replace(",", " ").replace(".", " ;") + "\n")
    words = gold.split()
    revision = words[:]
    for position in (10, 35, 60, 85):  # four edited words
        revision[position] = "changed"
    assert matcher.matches(" ".join(revision))
    assert matcher.matches(" ".join(words[30:] + "new text added in a later revision of the article".split()))


def test_gold_matcher_rejects_other_passages_of_the_same_article():
    passages = _demo_passages()
    for example in load_demo("dev") + load_demo("train"):
        gold = example.context[0]
        owner = next(p for p in passages if p["text"] == gold)
        matcher = passage_rules.GoldMatcher([gold])
        for other in passages:
            if other["title"] == owner["title"] and other["id"] != owner["id"]:
                assert not matcher.matches(other["text"]), (owner["id"], other["id"])


def test_question_words_skip_the_premise():
    assert categories.question_word("If the man who built it had left, what would happen?") == "what"
    assert categories.question_word("If X, how many states would it span?") == "how many/much"
    assert categories.question_word("If X were true, which city would host it?") == "which"
    assert categories.question_word("If X, who would win?") == "who"
    assert categories.question_word("Would it rain if X?") == "other"


@pytest.mark.parametrize(
    "answer, kind",
    [
        ("1990", "date"),
        ("May 5, 1990", "date"),
        ("19th century", "date"),
        ("1980s", "date"),
        ("17", "number"),
        ("1,000", "number"),
        ("2 hours", "number"),
        ("$5 million", "number"),
        ("nine", "number"),
        ("Bank of England", "entity"),
        ("Paris", "entity"),
        ("fixed exchange rate system", "other"),
    ],
)
def test_answer_types(answer, kind):
    assert categories.answer_type(answer) == kind


def test_bootstrap_is_deterministic_and_brackets_the_mean():
    values = [1.0] * 30 + [0.0] * 70
    low, high = significance.bootstrap_ci(values)
    assert low < 30.0 < high and (low, high) == significance.bootstrap_ci(values)


def test_paired_test():
    same = significance.paired_test([1, 0, 1, 0] * 25, [1, 0, 1, 0] * 25)
    assert same["difference"] == 0 and same["p_value"] == 1.0
    better = significance.paired_test([1] * 60 + [0] * 40, [0] * 60 + [0] * 40)
    assert better["difference"] == 60.0 and better["p_value"] < 0.001


def test_run_recall_uses_flags_or_recomputes_them():
    examples = [Example("1", "If X, what would Y be?", ["blue"], ["the sky is blue on clear days when the sun is up"])]
    ctxs = [
        {"id": "a", "title": "t", "text": "nothing here at all"},
        {"id": "b", "title": "t", "text": "The sky is blue on clear days when the sun is up!"},
    ]
    record = {"qid": "1", "question": examples[0].question, "answers": ["blue"], "ctxs": ctxs}
    report = summary.summarize_run([json.loads(json.dumps(record))], examples)
    assert report["recall"]["gold"] == {"1": 0.0, "2": 100.0}
    record["ctxs"] = ctxs * 3  # depth 6 -> recall@1 and @5
    report = summary.summarize_run([record], examples)
    assert report["recall"]["gold"] == {"1": 0.0, "5": 100.0, "6": 100.0}
    assert report["recall"]["answer"] == {"1": 0.0, "5": 100.0, "6": 100.0}


#: A small vocabulary, so that random texts share 5-grams with the gold: case, accents, a ligature,
#: punctuation glued to words, numbers, and repeats.
WORDS = ["the", "river", "River", "ﬁeld", "field", "café", "cafe", "1,000", "U.S.", "dam's", "of", "a", "ran"]


def _gold_rule(gold_passages, text) -> bool:
    """The rule as GoldMatcher's docstring states it, computed the plain way (every 5-gram set)."""
    import re
    import unicodedata

    def grams(passage):
        words = re.findall(r"[^\W_]+", unicodedata.normalize("NFKD", passage.lower()))
        if len(words) < 5:
            return {tuple(words)} if words else set()
        return set(zip(*(words[i:] for i in range(5))))

    candidate = grams(text)
    for gold in filter(None, map(grams, gold_passages)):
        shared = len(candidate & gold)
        if candidate and shared and shared >= 0.5 * min(len(candidate), len(gold)):
            return True
    return False


@settings(max_examples=1500)
@given(
    gold=st.lists(st.lists(st.sampled_from(WORDS), min_size=0, max_size=40), min_size=1, max_size=3),
    edits=st.lists(st.tuples(st.integers(0, 60), st.sampled_from(WORDS)), max_size=25),
    cut=st.integers(0, 40),
    keep=st.integers(1, 60),
)
def test_gold_matcher_decides_exactly_as_its_rule(gold, edits, cut, keep):
    """The matcher settles most passages without their 5-grams (a bound from the gold's
    vocabulary); on texts built to sit near the threshold (revisions, cuts, repeats, short
    passages, accents, ligatures) it decides exactly as the rule computed the plain way."""
    golds = [" ".join(words) for words in gold]
    words = list(gold[0][cut : cut + keep])
    for position, word in edits:
        words.insert(min(position, len(words)), word)
    text = " ".join(words)
    assert passage_rules.GoldMatcher(golds).matches(text) == _gold_rule(golds, text)
