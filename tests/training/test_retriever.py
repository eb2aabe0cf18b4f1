"""`ifqa train --retriever` (full and question-side only) and the guards on how its encoder is used."""

import json

import pytest

from ifqa.errors import IfqaError

TRAIN = [
    "--index",
    "demo:bm25",
    "--setting",
    "demo",
    "--questions-per-step",
    "4",
    "--max-length",
    "64",
    "--hard-depth",
    "10",
    "--no-progress",
]


@pytest.fixture(scope="module")
def question_side(tmp_path_factory, tiny_model):
    from tests.conftest import run_cli

    out = tmp_path_factory.mktemp("retriever") / "q"
    result = run_cli("train", "--retriever", *TRAIN, "--question-side-only", "--model", tiny_model, "-o", out)
    assert result.returncode == 0, result.stderr
    return out / "model"


@pytest.fixture(scope="module")
def corpus_file(tmp_path_factory):
    from ifqa.datasets.demo import corpus_path

    return corpus_path()


def _dense(tmp_path, corpus, encoder, titles: bool):
    from ifqa.retrieval import dense
    from ifqa.retrieval.engines import DenseSettings

    folder = tmp_path / ("dense-titles" if titles else "dense")
    dense.build(corpus, folder, DenseSettings(encoder=str(encoder), max_length=64, titles=titles), progress=False)
    return folder


@pytest.mark.slow
def test_question_side_model_keeps_the_passage_index_valid(tmp_path, question_side, tiny_model, corpus_file):
    from ifqa import Pipeline

    card = json.loads((question_side / "ifqa_card.json").read_text())
    assert card["kind"] == "retriever" and card["extra"]["question_side_only"] is True
    assert card["extra"]["passage_encoder"] == str(tiny_model)
    index = _dense(tmp_path, corpus_file, tiny_model, titles=False)
    base = Pipeline(indexes=[str(index)], k=5)
    tuned = Pipeline(indexes=[str(index)], k=5, query_encoder=str(question_side))
    question = "If the harbour froze, where would ships shelter?"
    assert base.search(question) != tuned.search(question)  # the new question encoder is used


@pytest.mark.slow
def test_question_side_model_refuses_an_index_with_titles_or_another_encoder(
    tmp_path, question_side, tiny_model, corpus_file
):
    from ifqa import Pipeline

    with_titles = _dense(tmp_path, corpus_file, tiny_model, titles=True)
    with pytest.raises(IfqaError, match="encodes titles"):
        Pipeline(indexes=[str(with_titles)], query_encoder=str(question_side))
    other = _dense(tmp_path / "other", corpus_file, question_side, titles=False)
    with pytest.raises(IfqaError, match="trained against passage encoder"):
        Pipeline(indexes=[str(other)], query_encoder=str(question_side))


@pytest.mark.slow
def test_full_fine_tuning_makes_a_model_that_must_encode_without_titles(tmp_path, tiny_model, corpus_file, cli):
    out = tmp_path / "full"
    result = cli("train", "retriever", *TRAIN, "--model", tiny_model, "-o", out)
    assert result.returncode == 0, result.stderr
    assert json.loads((out / "model" / "ifqa_card.json").read_text())["extra"]["question_side_only"] is False
    refused = cli("index", "dense", "--corpus", corpus_file, "-o", tmp_path / "idx", "--encoder", out / "model")
    assert refused.returncode == 1 and "encode with --no-titles" in refused.stderr
    assert not (tmp_path / "idx" / "manifest.json").exists()


def test_not_a_model_folder(tmp_path, cli):
    (tmp_path / "empty").mkdir()
    result = cli("train", "--retriever", *TRAIN, "--model", tmp_path / "empty", "-o", tmp_path / "out")
    assert result.returncode == 1 and "not a model folder" in result.stderr
