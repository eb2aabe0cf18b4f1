"""Index specs: the demo indexes made in the cache on first use, the dense one copied from the
index ifqa ships when that index is the one this collection and recipe would build."""

import json
import shutil

import numpy as np
import pytest

import ifqa
from ifqa.io import file_sha256
from ifqa.retrieval.dense_search import DenseRetriever
from ifqa.retrieval.engines import settings_params
from ifqa.retrieval.index import MANIFEST, read_manifest
from ifqa.retrieval.specs import DEMO_INDEXES, index_folder

faiss = pytest.importorskip("faiss")


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("IFQA_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    return tmp_path / "cache"


@pytest.fixture
def builds(monkeypatch):
    """The demo builds asked for, (name, recipe) each, instead of building."""
    asked = []

    def build(cls, corpus, folder, settings, *, progress=True, force=False):
        recipe = settings_params(settings)
        asked.append(("dense", recipe))
        folder.mkdir(parents=True)
        manifest = {"engine": "faiss", "params": recipe, "corpus": {"path": str(corpus), "sha256": "x"}}
        (folder / MANIFEST).write_text(json.dumps(manifest))

    monkeypatch.setattr(DenseRetriever, "build", classmethod(build))
    return asked


def test_the_shipped_demo_dense_index_is_what_the_demo_recipe_builds(cache):
    """Built from the demo collection as it ships, with the recipe, one vector per passage in the
    collection's order: re-encoding passages spread over it gives the vectors stored for them."""
    from ifqa.datasets.demo import corpus_path
    from ifqa.retrieval.encoders import load_encoder

    shipped = DEMO_INDEXES.shipped_folder("dense")
    manifest = read_manifest(shipped)
    corpus = corpus_path()
    passages = [json.loads(line) for line in corpus.read_text().splitlines()]
    assert manifest["corpus"]["sha256"] == file_sha256(corpus), "rebuild it: see ifqa/demo/README.md"
    assert DEMO_INDEXES.recipe("dense").items() <= manifest["params"].items()
    index = faiss.read_index(str(shipped / "index.faiss"))
    assert index.ntotal == manifest["passages"] == len(passages) == len(np.load(shipped / "offsets.npy"))
    params = manifest["params"]
    encoder = load_encoder(params["encoder"], device="cpu", max_length=params["max_length"])
    picks = np.linspace(0, len(passages) - 1, 12).astype(int)
    fresh = encoder.encode_passages([passages[i] for i in picks])
    stored = np.stack([index.reconstruct(int(i)) for i in picks])
    assert np.min(np.sum(fresh * stored, axis=1)) > 0.9999  # unit vectors: cosine


def test_first_use_copies_the_shipped_dense_index_and_it_searches(cache, builds):
    from ifqa.datasets.demo import corpus_path

    folder = index_folder("demo:dense")
    assert builds == []
    manifest = read_manifest(folder)
    assert manifest["corpus"]["path"] == str(corpus_path().resolve())
    assert manifest["copied_from"] == str(DEMO_INDEXES.shipped_folder("dense"))
    assert sorted(p.name for p in folder.iterdir()) == ["index.faiss", MANIFEST, "offsets.npy"]
    assert manifest["bytes"] == sum(p.stat().st_size for p in folder.iterdir() if p.name != MANIFEST)
    [hit] = ifqa.open_index("demo:dense", device="cpu").search("Who founded anarchism as a philosophy?", k=1)
    assert hit.title == "Anarchism"
    stamp = (folder / MANIFEST).stat().st_mtime_ns
    assert index_folder("demo:dense") == folder and (folder / MANIFEST).stat().st_mtime_ns == stamp  # kept


def test_a_shipped_index_of_another_collection_or_recipe_is_built_instead(cache, builds, tmp_path, monkeypatch):
    shipped = tmp_path / "shipped"
    shutil.copytree(DEMO_INDEXES.shipped_folder("dense"), shipped)
    monkeypatch.setattr(type(DEMO_INDEXES), "shipped_folder", lambda self, name: shipped)
    manifest = read_manifest(shipped)
    (shipped / MANIFEST).write_text(json.dumps({**manifest, "corpus": {**manifest["corpus"], "sha256": "0" * 64}}))
    index_folder("demo:dense")
    assert builds == [("dense", DEMO_INDEXES.recipe("dense"))]
    (shipped / MANIFEST).write_text(json.dumps({**manifest, "params": {**manifest["params"], "max_length": 256}}))
    shutil.rmtree(cache / "indexes")
    index_folder("demo:dense")
    assert len(builds) == 2
    assert "copied_from" not in read_manifest(cache / "indexes" / "demo-dense")


def test_a_cached_index_of_an_older_recipe_is_replaced_by_the_shipped_one(cache, builds):
    folder = index_folder("demo:dense")
    manifest = read_manifest(folder)
    (folder / MANIFEST).write_text(json.dumps({**manifest, "params": {**manifest["params"], "max_length": 64}}))
    (folder / "leftover.npy").write_bytes(b"old")
    assert index_folder("demo:dense") == folder and builds == []
    assert read_manifest(folder)["params"]["max_length"] == 128 and not (folder / "leftover.npy").exists()


def test_processes_using_a_demo_index_for_the_first_time_at_once_all_get_it(cache):
    """Two processes on a fresh cache: one copies the shipped index, the other waits for it (no
    "another build into this folder is running"; three at once failed one to three of them)."""
    import os
    import subprocess
    import sys

    code = "import ifqa; print(ifqa.open_index('demo:dense').search('If the river dried up?', k=1)[0].id)"
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    jobs = [
        subprocess.Popen(
            [sys.executable, "-c", code], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        for _ in range(2)
    ]
    outputs = [job.communicate(timeout=300) for job in jobs]
    assert [job.returncode for job in jobs] == [0, 0], [err[-800:] for _, err in outputs]
    assert len({out for out, _ in outputs}) == 1


def test_a_moved_cache_still_opens_both_demo_indexes(cache, tmp_path, monkeypatch):
    """The cached manifests record where the collection was; a demo index reads the cache's own."""
    before = ifqa.open_index("demo:bm25").search("If the river dried up?", k=3)
    index_folder("demo:dense")
    moved = tmp_path / "moved"
    shutil.move(cache, moved)
    monkeypatch.setenv("IFQA_CACHE_DIR", str(moved))
    assert ifqa.open_index("demo:bm25").search("If the river dried up?", k=3) == before
    assert len(ifqa.open_index("demo:dense").search("If the river dried up?", k=3)) == 3


def test_a_hand_edited_cached_collection_is_unpacked_again(cache, caplog):
    from ifqa.datasets.demo import corpus_path

    path = corpus_path()
    shipped = path.read_bytes()
    path.write_bytes(shipped.replace(b"river", b"rivet", 1))
    with caplog.at_level("WARNING"):
        assert corpus_path().read_bytes() == shipped
    assert "was changed; unpacking it again" in caplog.text


def test_a_damaged_cached_demo_index_is_made_again_not_left_to_the_user(cache, caplog):
    folder = index_folder("demo:bm25")
    expected = ifqa.open_index("demo:bm25").search("If the river dried up?", k=3)
    offsets = folder / "offsets.npy"
    offsets.write_bytes(offsets.read_bytes()[:40])
    with caplog.at_level("WARNING"):
        assert ifqa.open_index("demo:bm25").search("If the river dried up?", k=3) == expected
    assert "is damaged" in caplog.text and "making it again" in caplog.text


def test_a_complete_cache_is_read_without_a_lock_or_a_write(cache, monkeypatch):
    """A shared install's cache may be read-only: once demo:bm25 is there, opening it takes no lock
    and writes nothing; first uses lock the cache folder itself, so no lock file is left behind."""
    import fcntl

    index_folder("demo:bm25")
    root = cache / "indexes"
    before = sorted((p.name, p.stat().st_mtime_ns) for p in root.iterdir())
    assert not [p for p in root.iterdir() if p.name.endswith(".lock")]

    def refused(*args):
        raise PermissionError(1, "Operation not permitted")

    monkeypatch.setattr(fcntl, "flock", refused)
    assert index_folder("demo:bm25") == root / "demo-bm25"
    assert sorted((p.name, p.stat().st_mtime_ns) for p in root.iterdir()) == before
