"""A length limit shorter than the question (issue #47, family 9): every command that joins a
question and its passages into one input (a cross-encoder's pair, FiD's ``question: title:
context:``) runs, cuts where it must, and says once, not per batch, that those inputs read little
or none of their passages; at the default limits it says nothing."""

from __future__ import annotations

import json

import pytest

from tests.readers.tiny_models import tiny_t5
from tests.training.test_reranker import TRAIN

LONG = (
    "If the river that "
    + "flows past the old mill and under the stone bridge " * 6
    + "dried up, where would the ducks go?"
)


@pytest.fixture(scope="module")
def inputs(tmp_path_factory, tiny_model):
    """A run whose questions are long, with two passages each; a tiny T5 for FiD."""
    base = tmp_path_factory.mktemp("lengths")
    records = [
        {
            "qid": str(i),
            "question": f"{LONG} ({i})",
            "answers": ["the pond"],
            "ctxs": [{"id": f"{i}-{j}", "title": "River", "text": f"the pond is passage {j} " * 20} for j in range(2)],
        }
        for i in range(6)
    ]
    (base / "run.jsonl").write_text("".join(json.dumps(record) + "\n" for record in records))
    questions = [{"idx": i, "question": r["question"], "answers": r["answers"]} for i, r in enumerate(records)]
    (base / "questions.json").write_text(json.dumps(questions))
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    torch_seed()
    reranker = base / "reranker"  # the tiny BERT with a scoring head (random: only the lengths matter here)
    AutoModelForSequenceClassification.from_pretrained(tiny_model, num_labels=1).save_pretrained(reranker)
    AutoTokenizer.from_pretrained(tiny_model).save_pretrained(reranker)
    return base, tiny_model, reranker, tiny_t5(base / "t5")


def torch_seed() -> None:
    import torch

    torch.manual_seed(0)


# (command, the option that bounds the joined input, the value that leaves no room, the warning's start)
JOINING = [
    (("rerank", "--model", "{reranker}", "--depth", "2", "--batch-size", "2"), "--max-length", "16", "--max-length 16"),
    (("train", "reranker", "--model", "{bert}", *TRAIN), "--max-length", "16", "--max-length 16"),
    (
        ("train", "fid", "--model", "{t5}", "--steps", "2", "--batch-size", "2", "--n-context", "2"),
        "--text-maxlength",
        "8",
        "--text-maxlength 8",
    ),
]


def _command(words, base, bert, reranker, t5, out):
    names = {"{bert}": bert, "{reranker}": reranker, "{t5}": t5}
    args = [str(names.get(word, word)) for word in words]
    if args[:2] == ["train", "reranker"]:  # the demo's questions, with their gold passages, are long enough
        return [*args, "-o", out]
    if args[0] == "train":
        return [*args, "--run", base / "run.jsonl", "-o", out]
    return [*args, "--run", base / "run.jsonl", "--questions", base / "questions.json", "-o", out]


@pytest.mark.parametrize("words, option, short, said", JOINING, ids=[" ".join(c[0][:2]) for c in JOINING])
def test_a_limit_shorter_than_the_question_runs_and_is_said_once(cli, inputs, tmp_path, words, option, short, said):
    result = cli(*_command(words, *inputs, tmp_path / "out"), option, short, "--no-progress")
    assert result.returncode == 0, result.stderr
    assert result.stderr.count(said + " leaves no room") == 1, result.stderr
    result = cli(*_command(words, *inputs, tmp_path / "default"), "--no-progress")
    assert result.returncode == 0 and "leaves no room" not in result.stderr, result.stderr
