"""Multiple-choice scoring: which option a prediction chooses, in every form readers write one."""

import pytest

from ifqa.artifacts import Example
from ifqa.eval.multiple_choice import chosen, shown_choice, summarize_choices

OPTIONS = [("A", "granite"), ("B", "basalt"), ("C", "a dog"), ("D", "Mount Everest")]


@pytest.mark.parametrize(
    "prediction, label",
    [
        ("B", "B"),
        ("b", "B"),
        ("(B)", "B"),
        ("B)", "B"),
        ("B.", "B"),
        ("B,", "B"),
        ("**B**", "B"),
        ("Answer: B", "B"),
        ("The answer is B", "B"),
        ("The correct answer is B", "B"),
        ("Option B", "B"),
        ("B) basalt", "B"),
        ("B basalt", "B"),
        ("B, basalt", "B"),
        ("basalt", "B"),
        ("Basalt.", "B"),
        ("It is Mount Everest.", "D"),
        ("a dog", "C"),  # an article, not option A
        ("C", "C"),
        ("I think B", None),
        ("Apple", None),
        ("granite or basalt", None),  # two options: none chosen
        ("", None),
        ("E", None),
    ],
)
def test_the_option_a_prediction_chooses(prediction, label):
    assert chosen(prediction, OPTIONS) == label


def test_options_are_told_apart_by_label_even_when_their_texts_look_like_labels_or_repeat():
    numbers = [("1", "8"), ("2", "6"), ("3", "4"), ("4", "2")]
    assert chosen("3", numbers) == "3" and chosen(shown_choice("3", numbers), numbers) == "3"  # "3. 4"
    twins = [("A", "yes"), ("B", "yes"), ("C", "no")]
    assert chosen("B", twins) == "B" and chosen("yes", twins) is None  # the text names two options
    example = Example("1", "q", ["yes"], meta={"choices": [list(o) for o in twins], "answer_key": "B"})
    assert summarize_choices([example], {"1": "A"})["accuracy"] == 0.0


def test_accuracy_counts_unanswered_as_wrong_and_groups_by_options():
    examples = [
        Example("1", "q1", ["basalt"], meta={"choices": [list(o) for o in OPTIONS]}),
        Example("2", "q2", ["yes"], meta={"choices": [["A", "yes"], ["B", "no"]]}),
        Example("3", "q3", ["no"], meta={"choices": [["A", "yes"], ["B", "no"]]}),
    ]
    report = summarize_choices(examples, {"1": "B", "2": "maybe", "3": "no", "9": "A"}, {"1": "A", "2": "A", "3": "A"})
    assert (report["accuracy"], report["answered"], report["unknown_qids"]) == (
        pytest.approx(100 * 2 / 3, abs=0.01),
        2,
        1,
    )
    assert report["by_options"] == {
        "2": {"n": 2, "accuracy": 50.0, "ci95": report["by_options"]["2"]["ci95"]},
        "4": {"n": 1, "accuracy": 100.0, "ci95": [100.0, 100.0]},
    }
    assert report["compare"]["accuracy"] == pytest.approx(100 / 3, abs=0.01)
