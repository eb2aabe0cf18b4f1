"""Multiple-choice scoring: which option a prediction chooses, in every form readers write one."""

import pytest

from ifqa.artifacts import Example
from ifqa.eval.multiple_choice import answer_label, chosen, option_labels, shown_choice, summarize_choices

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
        ("B, C", None),  # several options named is no choice
        ("B and C", None),
        ("B or C", None),
        ("B/C", None),
        ("(B) & (D)", None),
        ("The answer is B or C.", None),
        ("B, C and D", None),
        ("B and basalt", "B"),  # its own text again, not another option
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


def test_labels_stay_unique_and_readable_for_any_number_of_options():
    """Options given as plain texts: A to Z, then AA, AB ... (never '[', '\\' or 'a', which a reader's
    'A' would also name); each label chooses its own option and no other."""
    labels = option_labels(60)
    assert labels[:3] == ["A", "B", "C"] and labels[25:28] == ["Z", "AA", "AB"] and labels[-1] == "BH"
    assert len({label.upper() for label in labels}) == 60 and all(
        label.isalpha() and label.isupper() for label in labels
    )
    choices = [(label, f"option number {n}") for n, label in enumerate(labels)]
    for label, text in choices:
        assert chosen(label, choices) == label and chosen(f"{label}. {text}", choices) == label
        assert answer_label(label, choices) == label
    assert answer_label("27", choices) == "AB" and answer_label("option number 3", choices) == "D"


def test_the_reader_and_the_scorer_read_several_options_alike():
    """The one function both use: a reader's answer naming two options is no choice, and evaluate
    counts it unanswered."""
    from ifqa.readers.llm.answers import for_task

    example = Example("q1", "Which rock?", ["basalt"], [], {"choices": [list(o) for o in OPTIONS], "answer_key": "B"})
    assert for_task("B or C", "", "mc", example) == ("", "")
    assert for_task("B", "", "mc", example) == ("B. basalt", "")
    report = summarize_choices([example], {"q1": "B, C"})
    assert report["answered"] == 0 and report["accuracy"] == 0.0
