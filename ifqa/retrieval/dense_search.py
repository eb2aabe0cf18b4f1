"""Dense search: a FAISS index built by ``dense`` (``ifqa index dense``), its questions encoded by the
encoder and backend that encoded the passages. Every file is checked against the manifest when
the index opens, so a damaged or hand-edited folder is one line, never a wrong answer later."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from ifqa import memory
from ifqa.devices import gpu_index, is_cuda
from ifqa.errors import IfqaError
from ifqa.retrieval import dense
from ifqa.retrieval.dense import FAISS_FILE
from ifqa.retrieval.encoders import query_encoder
from ifqa.retrieval.engines import DenseSettings, settings_of
from ifqa.retrieval.index import Positions, passage_store
from ifqa.retrieval.store import PassageStore

#: the index types faiss-gpu holds; HNSW has no GPU form
GPU_INDEX_TYPES = ("flat", "ivfpq")


def place_index(index, index_type: str, device: str | None) -> tuple:
    """The FAISS index where ``device`` searches it, and the GPU resources that must outlive it.

    On ``cuda:N`` it goes to GPU N (not GPU 0 whatever was asked), IVF-PQ with fp16 lookup tables
    (faiss-gpu needs them for large codes); an index the GPU cannot hold (HNSW), or a FAISS without
    GPU support, is searched on the CPU with one line saying so (questions are still encoded on the
    GPU). Decided before the encoder loads."""
    import logging

    import faiss

    if not device or not is_cuda(device):
        return index, None
    say = logging.getLogger(__name__).warning
    if not hasattr(faiss, "StandardGpuResources"):
        say("this FAISS has no GPU support (pip install faiss-gpu): the index is searched on the CPU")
        return index, None
    if index_type not in GPU_INDEX_TYPES:
        say("faiss-gpu cannot hold a %s index: it is searched on the CPU, questions encoded on %s", index_type, device)
        return index, None

    options = faiss.GpuClonerOptions()
    options.useFloat16LookupTables = index_type == "ivfpq"
    resources = faiss.StandardGpuResources()
    return faiss.index_cpu_to_gpu(resources, gpu_index(device), index, options), resources


class DenseRetriever:
    """The FAISS engine (``ENGINES["faiss"]``): an index with its query encoder and passage store."""

    Settings = DenseSettings

    build = staticmethod(dense.build)

    def __init__(self, index, encoder, manifest: dict, passages: PassageStore, name: str):
        self.index, self.encoder, self.manifest, self.passages, self.name = index, encoder, manifest, passages, name

    @classmethod
    def load(
        cls, index_dir: str | Path, manifest: dict, corpus: str | Path | None = None, device: str | None = None
    ) -> DenseRetriever:
        import faiss

        path = Path(index_dir) / FAISS_FILE
        size, machine = path.stat().st_size, memory.physical_memory()
        if machine and size > machine:  # FAISS reads the whole index into memory
            raise IfqaError(
                f"searching this index needs about {memory.size_text(size)} of memory, more "
                f"than this machine's {memory.size_text(machine)}; rebuild it with --index-type ivfpq",
                path,
            )
        params = manifest["params"]
        problems = []  # what settings_of cannot check: an encoder named (none would read as the default one), nlist
        if not isinstance(params.get("encoder"), str) or not params["encoder"]:
            problems.append("'encoder' must name a model")
        if params.get("index_type") == "ivfpq" and not (isinstance(params.get("nlist"), int) and params["nlist"] > 0):
            problems.append("'nlist' must be a positive integer")
        if problems:
            raise IfqaError(f"damaged manifest: {'; '.join(problems)}", Path(index_dir) / "manifest.json")
        settings_of(cls, manifest, Path(index_dir))  # what it was built with, checked
        index = faiss.read_index(str(path))
        if params["index_type"] == "hnsw":
            index.hnsw.efSearch = 128
        elif params["index_type"] == "ivfpq":
            index.nprobe = min(32, params["nlist"])
        index, resources = place_index(index, params["index_type"], device)
        encoder = query_encoder(params["encoder"], params.get("query_encoder"), params, device)
        store = passage_store(Path(index_dir), manifest, corpus)
        if index.ntotal != len(store) or index.d != encoder.dim:  # searching would fail, or answer from other vectors
            raise IfqaError(
                f"damaged index: {FAISS_FILE} holds {index.ntotal} vectors of {index.d} dimensions, the "
                f"collection {len(store)} passages and the encoder {encoder.dim}; rebuild it with --force",
                index_dir,
            )
        retriever = cls(index, encoder, manifest, store, f"dense:{Path(index_dir).name}")
        retriever._gpu_resources = resources  # freed with the index, never before it
        return retriever

    def search(self, queries: Sequence[str], k: int, threads: int = 1) -> list[Positions]:
        import faiss

        faiss.omp_set_num_threads(max(1, threads))
        vectors = self.encoder.encode_queries(list(queries))
        if not np.isfinite(vectors).all():  # a NaN query ranks passages at random: never answer from it
            raise IfqaError(
                f"the encoder gave non-finite vectors for {int((~np.isfinite(vectors)).any(axis=1).sum())} "
                f"of {len(vectors)} questions at precision {getattr(self.encoder, 'precision', 'fp32')}",
                self.name,
            )
        scores, positions = self.index.search(np.ascontiguousarray(vectors), min(k, len(self.passages)))
        return [[(int(p), float(s)) for p, s in zip(row_p, row_s) if p >= 0] for row_p, row_s in zip(positions, scores)]
