"""What ifqa takes from inside bm25s and numpy, each pinned by name, so an upgrade that moves one fails
here (and pyproject's upper bound on bm25s is raised only once these pass): the streamed build writes
the files bm25s's own ``index`` writes and ``BM25.load`` reads (tests/retrieval/test_bm25.py compares
them), searching a sorted vocabulary replaces ``BM25.unique_token_ids_set``, and the pages a search
read are released through ``numpy.memmap._mmap``."""

from __future__ import annotations

import inspect
import mmap
from importlib.metadata import version

import bm25s
import numpy as np
from packaging.requirements import Requirement


def test_the_bm25s_version_is_within_what_pyproject_admits():
    import tomllib
    from pathlib import Path

    project = tomllib.loads((Path(__file__).resolve().parents[2] / "pyproject.toml").read_text())
    [spec] = [Requirement(r) for r in project["project"]["dependencies"] if r.startswith("bm25s")]
    assert spec.specifier.contains(version("bm25s")) and any(s.operator in ("<", "<=") for s in spec.specifier)


def test_retrieve_reads_unique_token_ids_set():
    """bm25.BM25Retriever.load sets it to a range of every token id (not a set of millions)."""
    assert "self.unique_token_ids_set" in inspect.getsource(bm25s.BM25)


def test_load_takes_the_arguments_ifqa_passes():
    assert {"mmap", "load_vocab", "show_progress", "verbosity"} <= set(inspect.signature(bm25s.BM25.load).parameters)


def test_a_loaded_index_keeps_its_postings_in_three_named_arrays(tmp_path):
    model = bm25s.BM25()
    model.index(
        bm25s.tokenize(["a river runs", "a bridge crosses the river"], show_progress=False), show_progress=False
    )
    model.save(str(tmp_path))
    loaded = bm25s.BM25.load(str(tmp_path), mmap=True, show_progress=False, verbosity=0)
    assert {"data", "indices", "indptr"} <= set(loaded.scores)  # store.release_pages walks these


def test_a_numpy_memmap_holds_its_mmap_as_mmap(tmp_path):
    array = np.lib.format.open_memmap(tmp_path / "x.npy", mode="w+", dtype=np.float32, shape=(4,))
    assert isinstance(getattr(array, "_mmap", None), mmap.mmap)  # store.release_pages, for searches and builds
