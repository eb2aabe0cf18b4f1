"""CausalQA scoring: ROUGE-L against the rouge-score package and a hand computation, per source."""

import json

import pytest

from ifqa.artifacts import Example
from ifqa.eval.causalqa import question_scores, summarize_causalqa


def lcs(a: list[str], b: list[str]) -> int:
    """Longest common subsequence length, written out independently of any library."""
    table = [[0] * (len(b) + 1) for _ in range(len(a) + 1)]
    for i, x in enumerate(a):
        for j, y in enumerate(b):
            table[i + 1][j + 1] = table[i][j] + 1 if x == y else max(table[i][j + 1], table[i + 1][j])
    return table[-1][-1]


HAND = [  # prediction, reference, (precision, recall) by hand
    ("the cat on mat", "the cat sat on the mat", (4 / 4, 4 / 6)),
    ("because the sun heats the air", "the air is heated by the sun", (2 / 6, 2 / 7)),  # LCS "the sun"
    ("rain", "heavy rain falls", (1 / 1, 1 / 3)),
    ("nothing in common", "heavy rain falls", (0.0, 0.0)),
]


@pytest.mark.parametrize("prediction, reference, expected", HAND)
def test_rouge_l_matches_a_hand_computation_and_rouge_score(prediction, reference, expected):
    from rouge_score import rouge_scorer

    example = Example("q", "why?", [reference])
    score = question_scores([example], {"q": prediction})[0]
    precision, recall = expected
    assert lcs(prediction.split(), reference.split()) == round(precision * len(prediction.split()))
    assert score["rouge_l_precision"] == pytest.approx(precision)
    assert score["rouge_l_recall"] == pytest.approx(recall)
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    assert score["rouge_l_f1"] == pytest.approx(f1)
    official = rouge_scorer.RougeScorer(["rougeL"]).score(reference, prediction)["rougeL"]
    assert score["rouge_l_f1"] == pytest.approx(official.fmeasure)


def test_best_answer_per_question_and_per_source_macro_and_micro():
    examples = [
        Example("1", "q", ["heavy rain falls", "rain"], [], {"source": "a"}),
        Example("2", "q", ["the sun"], [], {"source": "a"}),
        Example("3", "q", ["ice floats"], [], {"source": "b"}),
    ]
    report = summarize_causalqa(examples, {"1": "rain", "2": "the moon", "3": "ice floats"})
    assert report["by_source"]["a"]["rouge_l_f1"] == pytest.approx(
        100 * (1.0 + 0.5) / 2
    )  # 'rain' matches an answer exactly
    assert report["by_source"]["b"]["em"] == 100.0 and report["by_source"]["a"]["em"] == 50.0
    assert report["macro"]["em"] == pytest.approx((50.0 + 100.0) / 2)
    assert report["em"] == pytest.approx(100 * 2 / 3, abs=0.01)  # micro: 2 of 3 questions
    assert report["answered"] == 3


def test_evaluate_picks_rouge_for_causalqa(cli, tmp_path):
    dev = tmp_path / "pred.jsonl"
    from ifqa.datasets import QuestionSource

    questions = QuestionSource("causalqa-demo", "dev").load()
    dev.write_text("".join(json.dumps({"qid": e.qid, "prediction": e.answers[-1]}) + "\n" for e in questions))
    result = cli("evaluate", "--predictions", dev, "--setting", "causalqa-demo", "--json")
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["task"] == "causalqa" and report["rouge_l_f1"] == 100.0 and report["em"] == 100.0
    assert set(report["by_source"]) == {"gooaq", "squad2"}
