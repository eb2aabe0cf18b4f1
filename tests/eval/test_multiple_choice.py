"""Multiple-choice scoring: which option a prediction chooses, in every form readers write one."""

import pytest

from ifqa.artifacts import Example
from ifqa.eval.multiple_choice import chosen, summarize_choices

OPTIONS = [("A", "granite"), ("B", "basalt"), ("C", "a dog"), ("D", "Mount Everest")]


@pytest.mark.parametrize(
    "prediction, option",
    [
        ("B", "basalt"),
        ("b", "basalt"),
        ("(B)", "basalt"),
        ("B)", "basalt"),
        ("B.", "basalt"),
        ("**B**", "basalt"),
        ("Answer: B", "basalt"),
        ("The answer is B", "basalt"),
        ("B) basalt", "basalt"),
        ("B basalt", "basalt"),
        ("basalt", "basalt"),
        ("Basalt.", "basalt"),
        ("It is Mount Everest.", "Mount Everest"),
        ("a dog", "a dog"),  # an article, not option A
        ("C", "a dog"),
        ("I think B", None),
        ("Apple", None),
        ("granite or basalt", None),  # two options: none chosen
        ("", None),
        ("E", None),
    ],
)
def test_the_option_a_prediction_chooses(prediction, option):
    assert chosen(prediction, OPTIONS) == option


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
