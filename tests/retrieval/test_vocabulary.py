"""The sorted, memory-mapped vocabulary a BM25 index is searched with: the same ids as bm25s's dict
for every term and none for any other, and the same runs as an index opened through the dict."""

from __future__ import annotations

import json
import shutil

import pytest

from ifqa.retrieval.vocabulary import IDS, OFFSETS, TERMS, SortedVocabulary, write_sorted


def test_every_term_and_no_other_is_found(tmp_path):
    vocabulary = {"river": 3, "rivers": 0, "é": 5, "ζ": 1, "a": 4, "ab": 2, "": 6, "z" * 300: 7}
    write_sorted(tmp_path, vocabulary)
    sorted_vocabulary = SortedVocabulary(tmp_path)
    assert len(sorted_vocabulary) == len(vocabulary) - 1  # bm25s's empty placeholder term is left out
    for term, number in vocabulary.items():
        if term:
            assert sorted_vocabulary.get(term) == number and term in sorted_vocabulary
    for absent in ("", "riv", "riverss", "b", "aa", "ε", "z" * 299, "\U0001f600"):
        assert sorted_vocabulary.get(absent) is None and absent not in sorted_vocabulary


def test_an_empty_vocabulary_finds_nothing(tmp_path):
    write_sorted(tmp_path, {"": 0})
    assert len(SortedVocabulary(tmp_path)) == 0 and SortedVocabulary(tmp_path).get("river") is None


@pytest.fixture(scope="module")
def demo_index(tmp_path_factory):
    from ifqa.datasets.demo import corpus_path
    from tests.conftest import run_cli

    folder = tmp_path_factory.mktemp("vocab") / "idx"
    assert run_cli("index", "bm25", "--corpus", corpus_path(), "-o", folder, "--no-progress").returncode == 0
    return folder


def test_the_demo_index_s_terms_all_agree_with_bm25s_s_dict(demo_index):
    vocabulary = json.loads((demo_index / "vocab.index.json").read_text(encoding="utf-8"))
    sorted_vocabulary = SortedVocabulary(demo_index)
    assert all(sorted_vocabulary.get(term) == number for term, number in vocabulary.items() if term)
    assert len(sorted_vocabulary) == len([term for term in vocabulary if term])


def test_runs_are_the_same_through_the_dict_and_the_sorted_files(demo_index, tmp_path, cli):
    older = tmp_path / "older"
    shutil.copytree(demo_index, older)
    for name in (TERMS, OFFSETS, IDS):  # an index built before the sorted files: bm25s's dict is read
        (older / name).unlink()
    runs = {}
    for name, folder in (("sorted", demo_index), ("dict", older)):
        runs[name] = tmp_path / f"{name}.jsonl"
        result = cli("retrieve", "--index", folder, "--k", "50", "-o", runs[name], "--no-progress")
        assert result.returncode == 0, result.stderr
    assert runs["sorted"].read_bytes() == runs["dict"].read_bytes()
