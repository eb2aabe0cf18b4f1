"""Index specs: the demo indexes made in the cache on first use, the dense one copied from the
index ifqa ships when that index is the one this collection and recipe would build."""

import json
import shutil

import numpy as np
import pytest

import ifqa
from ifqa.registry import INDEX_BUILDERS
from ifqa.retrieval.index import MANIFEST, file_sha256, read_manifest
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

    def builder(name):
        def build(corpus, folder, recipe, progress):
            asked.append((name, recipe))
            folder.mkdir(parents=True)
            manifest = {"engine": "faiss", "params": recipe, "corpus": {"path": str(corpus), "sha256": "x"}}
            (folder / MANIFEST).write_text(json.dumps(manifest))

        return build

    real = INDEX_BUILDERS.get
    monkeypatch.setattr(INDEX_BUILDERS, "get", lambda name: builder(name) if name == "dense" else real(name))
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
