"""WIQA scoring against accuracy computed by hand, and the label rules of its predictions files."""

import json

import pytest

from ifqa.artifacts import Example
from ifqa.eval.wiqa import normalize_label, summarize_wiqa

EXAMPLES = [
    Example("a", "q", ["more"], [], {"question_type": "INPARA_EFFECT", "path_length": 1}),
    Example("b", "q", ["less"], [], {"question_type": "INPARA_EFFECT", "path_length": 2}),
    Example("c", "q", ["more"], [], {"question_type": "EXOGENOUS_EFFECT", "path_length": 2}),
    Example("d", "q", ["less"], [], {"question_type": "EXOGENOUS_EFFECT", "path_length": 3}),
    Example("e", "q", ["no_effect"], [], {"question_type": "OUTOFPARA_DISTRACTOR", "path_length": 0}),
]


def test_accuracy_overall_by_type_and_path_length_match_a_hand_count():
    predictions = {"a": "more", "b": "more", "c": "more", "d": "", "e": "no_effect"}  # right: a, c, e
    report = summarize_wiqa(EXAMPLES, predictions)
    assert report["accuracy"] == 60.0 and report["answered"] == 4
    assert list(report["by_question_type"]) == ["in-para", "out-of-para", "no-effect"]  # the paper's order
    assert {k: v["accuracy"] for k, v in report["by_question_type"].items()} == {
        "in-para": 50.0,
        "out-of-para": 50.0,
        "no-effect": 100.0,
    }
    assert {k: (v["n"], v["accuracy"]) for k, v in report["by_path_length"].items()} == {
        "0": (1, 100.0),
        "1": (1, 100.0),
        "2": (2, 50.0),
        "3": (1, 0.0),
    }
    low, high = report["accuracy_ci95"]
    assert 0 <= low <= 60.0 <= high <= 100


def test_paired_comparison_per_question_type():
    better = {"a": "more", "b": "less", "c": "more", "d": "less", "e": "no_effect"}
    worse = {"a": "less", "b": "more", "c": "less", "d": "more", "e": "more"}
    compare = summarize_wiqa(EXAMPLES, better, worse)["compare"]
    assert compare["accuracy"] == 0.0 and compare["accuracy_difference"]["difference"] == 100.0
    assert compare["by_question_type"]["in-para"]["difference"] == 100.0


@pytest.mark.parametrize(
    "text, label",
    [
        ("more", "more"),
        (" LESS ", "less"),
        ("no effect", "no_effect"),
        ("No_Effect", "no_effect"),
        ("no-effect", "no_effect"),
        ("", ""),
        ("maybe", None),
        ("more or less", None),
    ],
)
def test_prediction_labels(text, label):
    assert normalize_label(text) == label


def test_evaluate_picks_accuracy_for_wiqa_and_refuses_a_non_label(cli, tmp_path):
    good = tmp_path / "majority.jsonl"
    assert cli("read", "majority", "--setting", "wiqa-demo", "-o", good).returncode == 0
    result = cli("evaluate", "--predictions", good, "--json")  # questions inferred from the manifest
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    gold = [
        json.loads(line)["question"]["answer_label"]
        for line in (__import__("importlib").resources.files("ifqa.demo") / "wiqa" / "dev.jsonl")
        .read_text()
        .splitlines()
    ]
    predicted = json.loads(good.read_text().splitlines()[0])["prediction"]
    assert report["task"] == "wiqa" and report["accuracy"] == round(100 * gold.count(predicted) / len(gold), 2)
    bad = tmp_path / "bad.jsonl"
    lines = good.read_text().splitlines()
    lines[2] = json.dumps({"qid": json.loads(lines[2])["qid"], "prediction": "probably more"})
    bad.write_text("\n".join(lines) + "\n")
    out = tmp_path / "metrics.json"
    result = cli("evaluate", "--predictions", bad, "--setting", "wiqa-demo", "--output", out)
    assert result.returncode == 1 and not out.exists()
    assert result.stderr.strip() == (
        f"ifqa: error: {bad}:3: prediction 'probably more' is not a WIQA label "
        "(more, less, no_effect, or empty to abstain)"
    )
