import pytest

from ifqa.readers.llm.answers import extract, majority


@pytest.mark.parametrize(
    "output, reasoning, answer",
    [
        (" Paris\n", False, "Paris"),
        ('"Paris".', False, "Paris"),
        ("The answer is Paris.", False, "Paris"),
        ("Answer: **1,200 people**", False, "1,200 people"),
        ("Step one.\nStep two.\nSo the answer is 1938.", True, "1938"),
        ("Thinking... the answer would be “Tim Kaine”.\nMore text", True, "Tim Kaine"),
        ("First line of reasoning\nFlorida", True, "Florida"),
        ("Russia\nbecause of the strait", False, "Russia"),
        ("", False, ""),
        # shapes SmolLM2 wrote on IfQA dev (reworded here onto the demo's questions)
        ('The answer is the answer to the question "What would the bridge cross?"', False, ""),
        ("Step 5: The answer is the answer.\n\nSo the answer is: What would the bridge cross?", True, ""),
        ("The answer to this question is: The answer to this question is: The answer to this", False, ""),
        ('The answer to this question is "Alabama" would have climbed to 19.', False, "Alabama"),
        (
            "The answer to this question depends on the premise. The river would be dry.",
            False,
            "The river would be dry",
        ),
        ("The answer key was lost.", False, "The answer key was lost"),
    ],
)
def test_extract(output, reasoning, answer):
    assert extract(output, reasoning)[0] == answer


def test_extract_keeps_the_reasoning():
    answer, rationale = extract("Aristotle joined at 18.\nTwo years later is 20.\nSo the answer is 20.", True)
    assert answer == "20" and rationale == "Aristotle joined at 18.\nTwo years later is 20."


def test_majority_votes_on_normalized_answers():
    assert majority(["The Beatles", "Queen", "beatles", "Queen."]) == "The Beatles"  # tie: earliest wins
    assert majority(["Queen", "the beatles", "Beatles"]) == "the beatles"
    assert majority([]) == ""


#: Every shape a model writes an answer X in (issue #69): X must come back from each.
SHAPES = (
    "{x}",
    "{x}.",
    "The answer is: {x}.",
    "So the answer is: {x}.",
    "Answer: {x}",
    "**{x}**",
    "**Answer:** {x}",
    "Sure!\n{x}",
    "Here is the answer:\n{x}",
    "Great question!\nThe answer is {x}.",
    "The answer is {x} because the premise changes it.",
    "{x} - because the premise says so.",
    "{x}; since the premise holds.",
)


def _round_trip_failures(golds) -> list:
    from ifqa.eval.answers import is_non_answer, normalize_answer

    failures = [("a non-answer", gold, gold) for gold in golds if is_non_answer(gold)]  # golds are answers
    for gold in sorted(golds):
        for shape in SHAPES:
            got = extract(shape.format(x=gold))[0]
            if normalize_answer(got) != normalize_answer(gold):
                failures.append((shape, gold, got))
    return failures


def test_every_demo_and_wiqa_answer_survives_every_reply_shape():
    from ifqa.datasets import QuestionSource
    from ifqa.registry import DATASETS

    golds = {"more", "less", "no effect"}  # WIQA's labels
    for setting in ("demo", "wiqa-demo", "causalqa-demo"):
        for split in DATASETS.get(setting).splits:
            golds |= {a for e in QuestionSource(setting, split).load().examples for a in e.answers}
    assert len(golds) > 50 and _round_trip_failures(golds) == []


@pytest.mark.shared_data
def test_every_ifqa_gold_answer_survives_every_reply_shape(shared):
    import json

    golds = set()
    for name in ("full_split/train.json", "full_split/dev.json", "few_split/train.json"):
        golds |= {a for e in json.loads((shared / "ifqa" / name).read_text()) for a in e["answers"]}
    assert len(golds) > 3000 and _round_trip_failures(golds) == []


@pytest.mark.parametrize(
    "reply, answer",
    [  # answers that look like chatter, and chatter around answers: the answer, or "" (none), never the chatter
        ("The answer is: Great Britain.", "Great Britain"),
        ("Oklahoma.", "Oklahoma"),
        ("A New Hope.", "A New Hope"),
        ("Good Friday.", "Good Friday"),
        ("So the answer is: okapi1.", "okapi1"),
        ("Greater New Orleans Bridge No. 2", "Greater New Orleans Bridge No. 2"),
        ("It would be Paris.", "Paris"),
        ("The answer is Paris because the premise moves the capital.", "Paris"),
        ("YES - because the premise says so.", "YES"),
        ("Paris — since the premise moves it.", "Paris"),
        ("Here is the answer:\nParis", "Paris"),
        ("Sure!\nParis", "Paris"),
        ("What a delightful question! Paris.", "Paris"),
        ("The question asks what colour X would be. Paris.", "Paris"),
        ("The answer is: If the river dried up, what would the bridge cross?", ""),
        ("The answer is that the answer is that the answer is that", ""),
        ("The answer is THAT Corporation.", "THAT Corporation"),
        ("The answer is that the answer is that the answer is that the", ""),
        ("Answer: The answer is that the answer is that the answer", ""),
        ("Who is Sylvia?", "Who is Sylvia?"),
        ('The answer is "Who is Sylvia?"', "Who is Sylvia?"),
        ("What would the bridge cross?", ""),
        ("Question: Who is Sylvia?", ""),
    ],
)
def test_chatter_is_never_an_answer(reply, answer):
    assert extract(reply)[0] == answer


NON_ANSWERS = ["I don't know", "I don't know.", "I cannot answer that.", "Unknown.", "N/A", "It is impossible to say."]
NON_ANSWERS += ["I do not know the answer to this question.", "I can't tell from the passages."]


@pytest.mark.parametrize("reply", NON_ANSWERS)
def test_a_non_answer_is_kept_as_said_and_counted_apart_as_an_abstention(reply):
    """A reply that declines to answer stays the model's words (docs/readers.md), and the scorer counts it
    apart: neither answered nor a wrong answer given, whichever tool wrote it."""
    from ifqa.artifacts import Example
    from ifqa.eval.answers import is_non_answer
    from ifqa.eval.summary import summarize_predictions

    answer = extract(reply)[0]
    assert is_non_answer(answer), answer
    examples = [Example("1", "If the sea rose, what would flood?", ["the coast"]), Example("2", "Q?", ["Paris"])]
    report = summarize_predictions(examples, {"1": answer, "2": "Paris"})
    assert (report["answered"], report["abstained"], report["em"]) == (1, 1, 50.0)
