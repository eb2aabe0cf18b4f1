"""Two processes on one output (trust round 6): the second is refused at once in one line saying another
run is writing it (io.exclusive), and the first one's work is untouched."""

import pytest

from ifqa.io import exclusive


@pytest.fixture
def run_file(cli, tmp_path):
    run = tmp_path / "run.jsonl"
    assert cli("retrieve", "--k", "3", "-o", run, "--no-progress").returncode == 0
    return run


@pytest.fixture(scope="module")
def reranker(tmp_path_factory, tiny_model):
    from tests.conftest import run_cli
    from tests.training.test_reranker import TRAIN

    out = tmp_path_factory.mktemp("races") / "rr"
    assert run_cli("train", "reranker", *TRAIN, "--model", tiny_model, "-o", out, "--no-progress").returncode == 0
    return out / "model"


def _writers(tmp_path, run_file, tiny_model):
    corpus = tmp_path / "p.jsonl"
    corpus.write_text('{"id": "p1", "title": "T", "text": "a river"}\n')
    return {
        "index bm25": (
            ["index", "bm25", "--corpus", corpus, "-o", tmp_path / "idx"],
            tmp_path / "idx",
            "another build",
        ),
        "rerank": (
            ["rerank", "--run", run_file, "--model", tiny_model, "--depth", "3", "-o", tmp_path / "rr.jsonl"],
            tmp_path / "rr.jsonl",
            "another ifqa rerank is writing",
        ),
    }


@pytest.mark.parametrize("name", ["index bm25", "rerank"])
def test_a_second_writer_of_one_output_is_refused_in_one_line(cli, tmp_path, run_file, reranker, name):
    args, output, expected = _writers(tmp_path, run_file, reranker)[name]
    with exclusive(output, "held by the test"):  # the first run, still writing
        result = cli(*args, "--no-progress")
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 1 and expected in lines[-1] and "Traceback" not in result.stderr, result.stderr
    assert not output.exists() and not output.with_name(output.name + ".partial").exists()
    result = cli(*args, "--no-progress")  # once the first is done, the same command runs
    assert result.returncode == 0, result.stderr
    assert not list(tmp_path.glob(".*.lock"))


def test_the_second_of_two_corpus_builds_names_the_first(cli, tmp_path):
    """Two identical builds at once: the second says another build is writing the output, and which
    process it is, instead of a staging file's 'File exists'."""
    import os

    from ifqa.io import exclusive

    source = tmp_path / "passages.jsonl"
    source.write_text('{"id": "a", "title": "T", "text": "some words of a passage"}\n')
    out = tmp_path / "out.jsonl"
    with exclusive(out, "another ifqa corpus build is writing this output"):  # the first build, in its run
        result = cli("corpus", "build", source, "-o", out, "--no-progress")
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 1 and len(lines) == 1, result.stderr
    assert "another ifqa corpus build is writing this output" in lines[0] and f"(process {os.getpid()})" in lines[0]
    assert not out.exists()
    again = cli("corpus", "build", source, "-o", out, "--no-progress")  # the first done: the same command runs
    assert again.returncode == 0 and out.exists() and not list(tmp_path.glob(".out.jsonl.*"))
