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
