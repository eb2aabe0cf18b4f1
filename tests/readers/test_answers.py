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
