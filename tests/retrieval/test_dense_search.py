"""Where a dense index is searched: on the GPU ``--device cuda:N`` names (not GPU 0), IVF-PQ with the
fp16 lookup tables faiss-gpu needs, and on the CPU, with one line saying so, for an index the GPU
cannot hold. faiss-gpu is stood in for by a recorder of its calls."""

import logging

import faiss
import numpy as np
import pytest

from ifqa.retrieval.dense_search import place_index
from tests.fake_cuda import FakeCuda


class FakeFaissGpu:
    def __init__(self, monkeypatch):
        self.calls = []
        recorder = self

        class GpuClonerOptions:
            useFloat16LookupTables = False

        def index_cpu_to_gpu(resources, device, index, options):
            recorder.calls.append((device, options.useFloat16LookupTables))
            return index

        monkeypatch.setattr(faiss, "StandardGpuResources", object, raising=False)
        monkeypatch.setattr(faiss, "GpuClonerOptions", GpuClonerOptions, raising=False)
        monkeypatch.setattr(faiss, "index_cpu_to_gpu", index_cpu_to_gpu, raising=False)


@pytest.mark.parametrize("device, gpu", [("cuda:1", 1), ("cuda:3", 3), ("cuda", 0)])
@pytest.mark.parametrize("index_type, fp16_tables", [("flat", False), ("ivfpq", True)])
def test_an_index_goes_to_the_gpu_asked_for(monkeypatch, device, gpu, index_type, fp16_tables):
    FakeCuda(count=4).install(monkeypatch)
    gpus = FakeFaissGpu(monkeypatch)
    index = faiss.IndexFlatIP(4)
    placed, resources = place_index(index, index_type, device)
    assert placed is index and resources is not None
    assert gpus.calls == [(gpu, fp16_tables)]


def test_an_index_the_gpu_cannot_hold_is_searched_on_the_cpu_with_one_line(monkeypatch, caplog):
    FakeCuda(count=2).install(monkeypatch)
    gpus = FakeFaissGpu(monkeypatch)
    index = faiss.IndexHNSWFlat(4, 8)
    index.add(np.eye(4, dtype=np.float32))
    with caplog.at_level(logging.WARNING):
        placed, resources = place_index(index, "hnsw", "cuda:1")
    assert placed is index and resources is None and gpus.calls == []
    assert "faiss-gpu cannot hold a hnsw index: it is searched on the CPU" in caplog.text


def test_a_faiss_without_gpu_support_searches_on_the_cpu(monkeypatch, caplog):
    monkeypatch.delattr(faiss, "StandardGpuResources", raising=False)
    index = faiss.IndexFlatIP(4)
    with caplog.at_level(logging.WARNING):
        assert place_index(index, "flat", "cuda:0") == (index, None)
    assert "no GPU support" in caplog.text
    assert place_index(index, "flat", "cpu") == (index, None) and place_index(index, "flat", None) == (index, None)
