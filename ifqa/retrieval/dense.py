"""Dense retrieval: encode passages in resumable, shardable chunks, then index them with FAISS.

Embeddings go to ``<index>/embeddings/chunk-<j>.npy`` (``default_chunk`` passages each, float32, memory-mapped
when merged). ``--shard i/N`` encodes the i-th of N equal runs of chunks, so N machines share the
work; an interrupted encoding skips the chunks already on disk. A final run without ``--shard``
encodes whatever is missing and builds the FAISS index (flat, HNSW or IVF-PQ); the manifest is
written last, so an index folder without one is never opened.
"""

from __future__ import annotations

import inspect
import json
import logging
import math
import os
import shutil
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from ifqa import memory
from ifqa.cards import read_card
from ifqa.devices import cpu_threads, pick_device, pick_precision
from ifqa.errors import IfqaError, restoring
from ifqa.io import atomic_write, publish_dir, settled, staging_prefix, umask_modes, write_json
from ifqa.models import check_model
from ifqa.retrieval.batching import default_batch_size
from ifqa.retrieval.bm25_build import count_passages
from ifqa.retrieval.chunks import ChunkEncoder, check_chunks, chunk_path, chunks_to_encode
from ifqa.retrieval.dense_ray import encode_on_ray
from ifqa.retrieval.encoders import resolve
from ifqa.retrieval.engines import DenseSettings, settings_params
from ifqa.retrieval.exported import Runtime
from ifqa.retrieval.index import MANIFEST, OFFSETS, corpus_record, finish_manifest, finished
from ifqa.retrieval.store import iter_corpus

log = logging.getLogger(__name__)

FAISS_FILE = "index.faiss"
#: passages per embedding file on a CPU by default (minutes of work there, so a resume loses little)
CHUNK = 4096
#: batches a default chunk holds at least: a chunk is what its batches are planned over, and a GPU's batch of
#: 512 in chunks of 4,096 left a tenth of a 256-token batch padding (32,768: 1.9%; benchmarks/padding.py)
PLANNED_BATCHES = 64
HNSW_M = 32
SAMPLE = 100_000  # vectors the merge samples to train IVF-PQ


def parse_shard(value: str | None) -> tuple[int, int] | None:
    """``"i/N"`` with 0 <= i < N (shards are numbered from 0)."""
    if not value:
        return None
    try:
        i, n = (int(part) for part in value.split("/"))
    except ValueError:
        raise IfqaError(f"--shard must look like i/N (e.g. 0/4), got {value!r}") from None
    if not 0 <= i < n:
        raise IfqaError(f"--shard {value}: need 0 <= i < N")
    return i, n


def _offsets(corpus: Path, folder: Path) -> np.ndarray:
    path = folder / OFFSETS
    if path.exists():
        return np.load(path, mmap_mode="r")
    offsets = np.fromiter((offset for offset, _ in iter_corpus(corpus)), dtype=np.int64)
    with atomic_write(path, "wb") as handle:
        np.save(handle, offsets)
    return offsets


def settings_path(folder: Path) -> Path:
    """Where a build records the settings its chunks were encoded with (read to resume and to merge)."""
    return folder / "embeddings" / "settings.json"


def default_chunk(folder: Path, device: str | None, batch_size: int | None) -> int:
    """Passages per chunk when ``--chunk-size`` is not given: the unfinished build's own (a resume, on any
    device, keeps it), else ``PLANNED_BATCHES`` of the device's batches and at least ``CHUNK``: 4,096 on a
    CPU, 32,768 at a GPU's default batch of 512."""
    try:
        recorded = json.loads(settings_path(folder).read_text()).get("chunk")
    except (OSError, ValueError, AttributeError):  # none, or damaged: _check_settings says so in one line
        recorded = None
    if isinstance(recorded, int) and recorded > 0:
        return recorded
    return max(CHUNK, PLANNED_BATCHES * (batch_size or default_batch_size(pick_device(device))))


def _check_settings(folder: Path, settings: dict, precision: str) -> None:
    """Resume only what these settings made. Leftovers of a failed start with other settings (no
    chunk encoded yet) are replaced, so they never block the corrected command; encoded chunks of
    other settings are kept unless ``--force`` discards them.

    ``precision`` is recorded beside them (``auto`` on Ray, whose actors choose theirs). Chunks of
    another precision may be resumed (their vectors agree within rounding), but the record then
    falls back to fp32, the one precision every encoder's questions are safe in."""
    path = settings_path(folder)
    if path.exists():
        with restoring(path, "use another -o folder, or --force to discard the unfinished build"):
            previous = json.loads(path.read_text())
            recorded = previous.pop("precision", None)
        if previous == settings:
            if recorded != precision:  # chunks of another precision (or of a build that recorded none) stay
                write_json(path, {**settings, "precision": "fp32" if _has_chunks(folder) else precision})
            return
        if _has_chunks(folder):
            raise IfqaError(
                "holds embeddings made with another encoder or collection; use another -o "
                "folder, or --force to discard them",
                folder,
            )
        log.info("%s: replacing the settings of an unfinished build that encoded nothing", folder)
        (folder / OFFSETS).unlink(missing_ok=True)
    write_json(path, {**settings, "precision": precision})


def _has_chunks(folder: Path) -> bool:
    return any((folder / "embeddings").glob("chunk-*.npy"))


def encode(
    corpus: str | Path,
    index_dir: str | Path,
    settings: DenseSettings = DenseSettings(),
    *,
    shard: tuple[int, int] | None = None,
    batch_size: int | None = None,
    device: str | None = None,
    progress: bool = True,
    chunk: int | None = None,
    threads: int | None = None,
    ray: str | None = None,
    ray_workers: int | None = None,
    precision: str = "auto",
    backend: str = "torch",
    max_batch_tokens: int | None = None,
) -> int:
    """Encode the chunks of one shard (or all) that are not on disk yet; returns how many were encoded.

    ``titles=False`` encodes passage text alone: the form trained retrievers read (IfQA's gold
    passages have no title, so a title would tell them apart). ``ray`` (``"local"`` or a cluster
    address) spreads the chunks over Ray actors, one per GPU (or CPU) the cluster has.
    """
    from tqdm import tqdm

    corpus, folder = Path(corpus), Path(index_dir)
    encoder_name, query_encoder = settings.encoder, settings.query_encoder
    max_length, titles = settings.max_length, settings.titles
    if (folder / MANIFEST).exists():
        raise IfqaError(
            "index folder already exists, built from other inputs or settings (use --force to replace it)", folder
        )
    if titles and read_card(encoder_name).get("kind") == "retriever":
        raise IfqaError(f"{encoder_name} was trained on passages without titles; encode with --no-titles")
    chunk = chunk or default_chunk(folder, None if ray else device, batch_size)
    (folder / "embeddings").mkdir(parents=True, exist_ok=True)
    record = corpus_record(corpus)
    if not ray:  # the precision the chunks are encoded in, recorded so that questions are encoded alike
        precision = pick_precision(precision, pick_device(device))
    settings = {
        "encoder": encoder_name,
        "query_encoder": query_encoder,
        "chunk": chunk,
        "max_length": max_length,
        "corpus_sha256": record["sha256"],
        **({} if titles else {"titles": False}),
        **({"backend": backend} if backend != "torch" else {}),
    }  # another backend's vectors never mix in
    _check_settings(folder, settings, precision)
    offsets = _offsets(corpus, folder)
    todo = chunks_to_encode(folder, chunk, len(offsets), shard or (0, 1))
    if not todo:
        return 0
    args = (corpus, folder, encoder_name, query_encoder, device, max_length, titles, batch_size, chunk)
    kwargs = {
        **({"precision": precision} if precision != "auto" else {}),
        **({"backend": backend} if backend != "torch" else {}),
        **({"max_batch_tokens": max_batch_tokens} if max_batch_tokens else {}),
    }
    size = lambda j: min(chunk, len(offsets) - j * chunk)  # noqa: E731 - passages of chunk j
    i, n = shard or (0, 1)
    chunks = -(-len(offsets) // chunk)
    mine = range(chunks * i // n, chunks * (i + 1) // n)
    done = sum(size(j) for j in mine) - sum(size(j) for j in todo)
    if done:  # said, not hidden in a smaller total
        log.info("%s: resuming; %d of %d passages were already encoded", folder, done, done + sum(map(size, todo)))
    # passages, counted as each batch finishes (a chunk of 4,096 is minutes on a CPU: a bar that moved
    # only per chunk looked frozen)
    bar = tqdm(total=done + sum(map(size, todo)), initial=done, unit="psg", desc="encode", disable=not progress)
    if ray:
        encode_on_ray(ray, ChunkEncoder, args, todo, bar.update, ray_workers, threads, kwargs)
    else:
        for _ in ChunkEncoder(*args, threads=threads, **kwargs).encode_many(todo, on_batch=bar.update):
            pass
    bar.close()
    return len(todo)


#: ``encode``'s options, with their defaults: what ``build`` passes on
ENCODING = inspect.signature(encode)


def _sample(arrays: list, chunk: int, total: int, seed: int) -> np.ndarray:
    """``SAMPLE`` vectors (all, when fewer) drawn without replacement by ``seed``, in passage order: what
    IVF-PQ trains on, read chunk by chunk (one gather a chunk, not one read a vector)."""
    picks = np.sort(np.random.default_rng(seed).choice(total, size=min(total, SAMPLE), replace=False))
    bounds = np.searchsorted(picks, np.arange(len(arrays) + 1) * chunk)
    parts = [arrays[j][picks[bounds[j] : bounds[j + 1]] - j * chunk] for j in range(len(arrays))]
    return np.ascontiguousarray(np.concatenate(parts))


def _make_index(index_type: str, dim: int, n: int, sample: Callable[[], np.ndarray]):
    """The empty index of ``index_type`` and what the manifest records of it; ``sample()`` gives the vectors
    an index that is trained (IVF-PQ) learns from, drawn only for it."""
    import faiss

    if index_type == "flat":
        return faiss.IndexFlatIP(dim), {}
    if index_type == "hnsw":
        index = faiss.IndexHNSWFlat(dim, HNSW_M, faiss.METRIC_INNER_PRODUCT)
        index.hnsw.efConstruction = 80
        return index, {"hnsw_m": HNSW_M, "ef_construction": 80}
    nlist, pq_m = _nlist(n), _pq_m(dim)  # ivfpq: check_memory has refused any other type
    vectors = sample()
    bits = max(1, min(8, int(math.log2(max(2, len(vectors))))))  # 8-bit codebooks need >= 256 points
    quantizer = faiss.IndexFlatIP(dim)
    index = faiss.IndexIVFPQ(quantizer, dim, nlist, pq_m, bits, faiss.METRIC_INNER_PRODUCT)
    index.train(vectors)
    return index, {"nlist": nlist, "pq_m": pq_m, "pq_bits": bits}


def _nlist(passages: int) -> int:
    return max(1, min(int(4 * math.sqrt(passages)), passages // 39))


def _pq_m(dim: int) -> int:
    return next(m for m in (96, 64, 48, 32, 24, 16, 12, 8, 4, 2, 1) if dim % m == 0 and m <= dim // 4)


def index_memory(index_type: str, passages: int, dim: int, chunk: int = CHUNK) -> int:
    """Bytes at the merge's peak: the FAISS index, built whole in memory (and loaded whole to search
    it), plus the training sample and the chunk of ``chunk`` passages being added."""
    vector = dim * 4
    per_passage = {"flat": vector, "hnsw": vector + 2 * HNSW_M * 4 + 16, "ivfpq": _pq_m(dim) + 8}[index_type]
    centroids = _nlist(passages) * vector if index_type == "ivfpq" else 0
    return passages * per_passage + centroids + (min(passages, SAMPLE) + min(passages, chunk)) * vector


def check_memory(
    index_type: str, passages: int, dim: int, budget: tuple[int, str], about: bool = False, chunk: int = CHUNK
) -> None:
    """Stop before the work when the index cannot fit ``budget`` (bytes and where the limit comes
    from, ``memory.limit``); ``about``: ``passages`` is an estimate."""
    limit, source = budget
    needed = index_memory(index_type, passages, dim, chunk)
    if needed <= limit:
        return
    hint = ""
    if index_type != "ivfpq" and (compressed := index_memory("ivfpq", passages, dim, chunk)) <= limit:
        hint = f"; --index-type ivfpq (compressed) needs about {memory.size_text(compressed)}"
    raise IfqaError(
        f"a {index_type} index of {'about ' if about else ''}{passages:,} passages x {dim} dimensions needs "
        f"about {memory.size_text(needed)} of memory to build and to search, over {source}{hint}"
    )


def embedding_size(encoder_name: str) -> int | None:
    """The embedding size, read from the model's files without loading its weights: a
    sentence-transformers folder's last Dense or Pooling module, else the transformer config.
    None when they are not on this machine (nothing is downloaded for it; the merge checks again
    with the real size)."""
    folder = Path(resolve(encoder_name))
    try:
        if (folder / "modules.json").is_file():
            for module in reversed(json.loads((folder / "modules.json").read_text())):
                config = folder / module.get("path", "") / "config.json"
                if module.get("type", "").endswith(("Dense", "Pooling")) and config.is_file():
                    values = json.loads(config.read_text())
                    return int(values.get("out_features") or values["word_embedding_dimension"])
        from transformers import AutoConfig

        config = AutoConfig.from_pretrained(str(folder) if folder.is_dir() else encoder_name, local_files_only=True)
        return int(getattr(config, "projection_dim", 0) or config.hidden_size)
    except (OSError, ValueError, KeyError, TypeError):
        return None


def merge(
    corpus: str | Path,
    index_dir: str | Path,
    index_type: str = "flat",
    seed: int = 0,
    started: float | None = None,
    max_memory: str | None = None,
) -> dict:
    """Build the FAISS index from all chunks (memory-mapped), then write the manifest.

    The encoder settings come from the embeddings folder, so the manifest says what made them.
    """
    import faiss

    started = started or time.time()
    folder = Path(index_dir)
    offsets = np.load(folder / OFFSETS, mmap_mode="r")
    settings = json.loads(settings_path(folder).read_text())  # what encoded the chunks
    chunk = int(settings["chunk"])
    chunks = math.ceil(len(offsets) / chunk)
    missing = [j for j in range(chunks) if not chunk_path(folder, j).exists()]
    if missing:
        raise IfqaError(
            f"{len(missing)} of {chunks} embedding chunks are missing (first: chunk {missing[0]}); "
            "finish every --shard first",
            folder,
        )
    total = len(offsets)
    check_chunks(folder, chunks, chunk, total)  # another shard's chunk may be damaged: one line, nothing unpickled
    arrays = [np.load(chunk_path(folder, j), mmap_mode="r", allow_pickle=False) for j in range(chunks)]
    dim = int(arrays[0].shape[1])
    check_memory(index_type, total, dim, memory.limit(max_memory), chunk=chunk)
    faiss.omp_set_num_threads(cpu_threads())  # a search in this process may have set fewer
    index, extra = _make_index(index_type, dim, total, lambda: _sample(arrays, chunk, total, seed))
    for array in arrays:
        index.add(np.ascontiguousarray(array, dtype=np.float32))

    tmp = folder / f"{staging_prefix(folder / FAISS_FILE)}faiss.tmp"  # a killed merge's leftover goes next time
    try:
        faiss.write_index(index, str(tmp))
        umask_modes(tmp)
        os.replace(tmp, folder / FAISS_FILE)
    except (RuntimeError, OSError) as exc:  # a full disk: FAISS's own error, the staging file half written
        tmp.unlink(missing_ok=True)
        reason = " ".join(str(getattr(exc, "strerror", None) or exc).split())[:160]
        raise IfqaError(
            f"could not write the FAISS index ({reason}); the finished chunks are kept: free space and rerun "
            "the same command",
            folder,
        ) from None
    params = {
        "encoder": settings["encoder"],
        "query_encoder": settings["query_encoder"],
        "max_length": settings.get("max_length"),
        "titles": settings.get("titles", True),
        "index_type": index_type,
        "dim": dim,
        "metric": "inner_product",
        **extra,
    }
    if settings.get("backend"):
        params["backend"] = settings["backend"]
    if settings.get("precision") in ("fp16", "bf16"):  # questions are encoded alike (devices.search_precision)
        params["precision"] = settings["precision"]
    sizes = {"index_bytes": (folder / FAISS_FILE).stat().st_size, "embeddings_bytes": sum(a.nbytes for a in arrays)}
    return finish_manifest(folder, "faiss", params, corpus_record(Path(corpus)), total, started, **sizes)


def build(
    corpus: str | Path,
    folder: str | Path,
    settings: DenseSettings = DenseSettings(),
    *,
    progress: bool = True,
    force: bool = False,
    max_memory: str | None = None,
    **encoding,
) -> dict | None:
    """Encode (one shard, or everything missing; on Ray when ``ray`` names a cluster) and, without a
    shard, build the index. Whether the index will fit ``max_memory`` is checked before encoding.
    ``encoding``: ``encode``'s options (shard, batch_size, device, chunk, threads, ray, ray_workers,
    precision, backend, max_batch_tokens: a token budget per batch, ``batching.plan``); ``backend`` is
    ``exported.Runtime``'s label (torch, onnx, openvino, onnx-int8, openvino-int8) and encodes the queries too."""
    how = ENCODING.bind(corpus, folder, settings, **encoding)  # an unknown option: a TypeError now
    how.apply_defaults()
    shard, device, precision, backend = (how.arguments[k] for k in ("shard", "device", "precision", "backend"))
    encoder_name, index_type = settings.encoder, settings.index_type
    # --force over an existing folder builds beside it (a fixed name, so an interrupted rebuild resumes) and
    # replaces it only once the new index is complete: a refused corpus or an interrupted build never costs
    # the index that was there
    target = settled(folder)
    building = target.parent / f".{target.name}.replacement" if force and target.exists() else target
    Runtime.parse(backend).check(device)
    if precision != "auto" or device:  # a device or precision this machine lacks: one line before any work
        pick_precision(precision, pick_device(device))
    ray, batch_size = how.arguments["ray"], how.arguments["batch_size"]
    chunk = how.arguments["chunk"] or default_chunk(building, None if ray else device, batch_size)
    budget = memory.limit(max_memory)  # a bad --max-memory is an error even for a --shard run
    if shard is None and (dim := embedding_size(encoder_name)):
        check_memory(index_type, count_passages(Path(corpus)), dim, budget, about=True, chunk=chunk)
    check_model(resolve(encoder_name), "; --encoder takes a sentence-transformers or DPR model")  # before any work
    if shard is None:  # a whole build that is already done is said so, not refused or redone
        expected = {**settings_params(settings), **({"backend": backend} if backend != "torch" else {})}
        done = finished(folder, "faiss", expected, corpus_record(Path(corpus)), force)
        if done is not None:
            return done
    if force and shard is not None and building != target:
        raise IfqaError("--force with --shard: shards add chunks to one folder; remove it yourself first", target)
    if building != target and (building / MANIFEST).exists():  # built, then killed before the swap: merged again
        (building / MANIFEST).unlink()
    started, created = time.time(), not building.exists()
    try:
        encode(corpus, building, settings, progress=progress, **{**encoding, "chunk": chunk})
    except IfqaError:  # refused before a chunk was written: leave nothing behind
        if created and not any((building / "embeddings").glob("chunk-*.npy")):
            shutil.rmtree(building, ignore_errors=True)
        raise
    if shard is not None:
        return None
    manifest = merge(corpus, building, index_type, started=started, max_memory=max_memory)
    if building != target:
        publish_dir(building, target)
    return manifest
