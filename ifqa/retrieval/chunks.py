"""Encoding a collection's chunks into ``embeddings/chunk-j.npy``: the unit of work, of sharding and
of resuming of ``ifqa index dense`` (``dense``), whether one process, a ``--shard`` run or a Ray actor
(``dense_ray``) encodes it."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ifqa import feeding
from ifqa.devices import entered
from ifqa.errors import IfqaError
from ifqa.io import atomic_write
from ifqa.retrieval.batching import batch_memory_hint, batch_rows
from ifqa.retrieval.encoders import load_encoder
from ifqa.retrieval.index import OFFSETS
from ifqa.retrieval.store import PassageStore


def chunk_path(folder: Path, j: int) -> Path:
    return folder / "embeddings" / f"chunk-{j:07d}.npy"


def chunk_problem(path: Path, rows: int) -> str | None:
    """Why a finished chunk file cannot be used (None when it can): unreadable, truncated, a pickle
    (never unpickled), or not ``rows`` float vectors. Reads the header only (memory-mapped)."""
    try:
        array = np.load(path, mmap_mode="r", allow_pickle=False)
    except (ValueError, OSError, EOFError) as exc:
        return f"unreadable ({' '.join(str(exc).split())[:120]})"
    if not isinstance(array, np.ndarray) or array.ndim != 2 or array.dtype.kind != "f" or len(array) != rows:
        shape = getattr(array, "shape", None)
        return f"holds {shape} {getattr(array, 'dtype', type(array).__name__)}, not {rows} vectors"
    return None


def check_chunks(folder: Path, chunks: int, chunk: int, total: int) -> None:
    """Refuse (one line naming it) the first of a folder's chunks that cannot be used."""
    for j in range(chunks):
        problem = chunk_problem(chunk_path(folder, j), min(chunk, total - j * chunk))
        if problem:
            raise IfqaError(
                f"{problem}; delete it and rerun the same command to encode it again", chunk_path(folder, j)
            )


def chunks_to_encode(folder: Path, chunk: int, total: int, shard: tuple[int, int]) -> list[int]:
    """The chunks of shard ``i`` of ``n`` not yet finished and sound (damaged ones removed)."""
    i, n = shard
    chunks = -(-total // chunk)
    return [
        j
        for j in range(chunks * i // n, chunks * (i + 1) // n)
        if not usable_chunk(chunk_path(folder, j), min(chunk, total - j * chunk))
    ]


def usable_chunk(path: Path, rows: int) -> bool:
    """Whether chunk ``path`` is finished and sound; a damaged one is removed, to be encoded again."""
    import logging

    if not path.exists():
        return False
    problem = chunk_problem(path, rows)
    if problem is None:
        return True
    logging.getLogger(__name__).warning("%s is damaged (%s); encoding it again", path, problem)
    path.unlink()
    return False


class ChunkEncoder:
    """Encodes chunks of a collection into ``embeddings/chunk-j.npy`` (each written whole or not at all).

    One per process: the local loop, each Ray actor (``dense_ray``) and each ``--shard`` run use it,
    so every path writes the same files. A chunk is tokenized whole and its batches planned by its
    passages' token counts (the encoder's ``passage_batches``), so a chunk holds the same vectors
    whichever path encoded it and its batches carry little padding; the next chunk is tokenized
    while the device encodes this one (``encode_many``).
    """

    def __init__(
        self,
        corpus: str | Path,
        folder: str | Path,
        encoder_name: str,
        query_encoder: str | None,
        device: str | None,
        max_length: int | None,
        titles: bool,
        batch_size: int | None,
        chunk: int,
        threads: int | None = None,
        precision: str = "auto",
        backend: str = "torch",
        max_batch_tokens: int | None = None,
    ):
        if threads:
            import torch

            torch.set_num_threads(threads)

        self.folder, self.titles, self.chunk = Path(folder), titles, chunk
        offsets = np.load(self.folder / OFFSETS, mmap_mode="r")
        self.total, self.store = len(offsets), PassageStore(corpus, offsets)
        self.encoder = load_encoder(encoder_name, query_encoder, device, max_length, precision, backend)
        if max_batch_tokens and not self.encoder.tokenizes_in_parallel:
            raise IfqaError(
                f"--max-batch-tokens plans batches by token counts, which {encoder_name}'s tokenizer does not give "
                "(not a fast tokenizer); leave it out"
            )
        self.batch_size = batch_rows(batch_size, max_batch_tokens, self.encoder.device)
        self.max_batch_tokens = max_batch_tokens

    def _batches(self, j: int) -> list[tuple[list[int], dict]]:
        """Chunk j's passages in batches planned by length (positions within the chunk, inputs)."""
        start = j * self.chunk
        passages = [self.store[p] for p in range(start, min(start + self.chunk, self.total))]
        if not self.titles:
            passages = [{**passage, "title": ""} for passage in passages]
        return self.encoder.passage_batches(passages, self.batch_size, self.max_batch_tokens)

    def encode_many(self, chunks: Sequence[int], on_batch: Callable[[int], Any] | None = None) -> Iterator[int]:
        """Encode and write each chunk in turn; yields the passages of each chunk written, and calls
        ``on_batch(n)`` as each batch of n passages is encoded (what a progress bar counts).

        A finished chunk is copied back, checked and saved by a writer thread while the device
        encodes the next one (the GPU never waits on ``np.save`` and ``fsync``); the count of a chunk
        is yielded once its file is on disk, and an error stops only after the pending chunk is written."""
        from concurrent.futures import ThreadPoolExecutor

        import torch

        chunks, pending = list(chunks), None
        device = self.encoder.device
        with (
            entered(device),  # the DataLoader's pinning thread, the allocator and events follow this device
            ThreadPoolExecutor(1, thread_name_prefix="chunk-writer") as writer,
            batch_memory_hint(
                self.batch_size,
                self.max_batch_tokens,
                " passages",
                kept=" (finished chunks are kept; the same command resumes)",
            ),
        ):
            workers = 0 if self.encoder.tokenizes_in_parallel else None
            for j, batches in zip(chunks, feeding.feed(chunks, self._batches, device, workers)):
                outputs = []
                for positions, features in batches:
                    outputs.append(self.encoder.passage_vectors(feeding.to_device(features, device)))
                    if on_batch is not None:
                        on_batch(len(positions))
                copied = feeding.copy_back(torch.cat(outputs))
                if pending is not None:
                    yield pending.result()
                order = j * self.chunk + np.concatenate([positions for positions, _ in batches])
                pending = writer.submit(self._write, j, order, *copied)
            if pending is not None:
                yield pending.result()

    def _write(self, j: int, positions: np.ndarray, host, copied) -> int:
        """Chunk j's file, rows in passage order: written whole, and only when every vector is finite."""
        if copied is not None:
            copied.synchronize()  # the copy back was queued behind the chunk's last batch
        vectors = np.empty((len(positions), self.encoder.dim), np.float32)
        vectors[positions - j * self.chunk] = host.numpy()
        if not np.isfinite(vectors).all():  # fp16 can overflow (T5-based encoders): never index NaN
            raise IfqaError(
                f"the encoder gave non-finite vectors for chunk {j} at --precision "
                f"{self.encoder.precision}; rerun with --precision bf16 or fp32 (finished chunks "
                "are kept)",
                self.folder,
            )
        try:
            with atomic_write(chunk_path(self.folder, j), "wb") as handle:
                np.save(handle, vectors)
        except OSError as exc:  # a full disk, a lost mount: one line, as on the main thread
            raise IfqaError(
                f"cannot write chunk {j} ({exc.strerror or exc}); finished chunks are kept: free the space "
                "and rerun the same command",
                chunk_path(self.folder, j),
            ) from None
        return len(positions)

    def encode(self, chunks: int | Sequence[int]) -> int:
        """Encode chunk j (or several chunks, tokenized ahead across them); the passages written."""
        return sum(self.encode_many([chunks] if isinstance(chunks, int) else chunks))
