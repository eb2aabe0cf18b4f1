"""Tokenizing at the pace of a GPU: texts tokenized by the fast tokenizer's own batch call, passages
tokenized once per tokenizer, and cross-encoder pairs built from their tokens.

A tokenizer's ``__call__`` spends most of its wall time in Python, turning each text's encoding into
lists and then tensors (about 80 µs a passage, on one thread whatever the cores): it caps one process
near 10,000 passages a second. ``BatchTokens`` asks the Rust tokenizer for the whole batch (its threads
in parallel, the GIL released, so a thread can tokenize ahead while the GPU runs), unpadded, then pads
all rows in one array step: the same ids, about 15 µs of Python a passage. Tokenized unpadded, a batch
can also be planned by its texts' token counts before it is padded (``BatchTokens.planned``).

A cross-encoder reads each (question, passage) pair; tokenizing the pair costs about 300 µs of CPU
for a 100-word passage, while a GPU scores tens of thousands of pairs a second, so a reranker that
tokenizes every pair again starves the GPU (and a run puts a passage under many questions, and
every rerun or second reranker reads the same passages again). Here a passage's ids are tokenized
once per tokenizer (``TokenCache``) and a pair is laid out from ids as the tokenizer lays it out
(``PairTokens``, held to the tokenizer's own pairs): microseconds a pair.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import sqlite3
import threading
import zlib
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from ifqa.models import pair_inputs
from ifqa.retrieval.batching import plan

log = logging.getLogger(__name__)

KEPT = 512  # ids kept of a passage: the longest input of the encoders a pair is built for
_BATCH = 512  # texts tokenized per call (the tokenizer's threads share a call's texts)
_QUERY = 900  # digests looked up per SELECT (under SQLite's limit of variables)


def fast_backend(tokenizer):
    """A fast tokenizer's own Rust tokenizer, or None for a slow one (tokenized by its own call)."""
    return getattr(tokenizer, "backend_tokenizer", None)


def tokenizer_identity(tokenizer) -> str | None:
    """A digest of everything that decides a fast tokenizer's ids (normalizer, pre-tokenizer, vocabulary,
    added tokens), or None for a tokenizer without that definition (a slow one: tokenized pair by pair).
    Its truncation and padding are left out: every call of the tokenizer resets them (a folder's saved
    128-token cut is gone after its first call), and what reads ids sets its own."""
    rust = fast_backend(tokenizer)
    if rust is None:
        return None
    definition = {k: v for k, v in json.loads(rust.to_str()).items() if k not in ("truncation", "padding")}
    text = json.dumps(definition, sort_keys=True)
    return hashlib.sha256(f"{type(tokenizer).__name__}\0{text}".encode()).hexdigest()


def batch_encoder(tokenizer, max_length: int | None = None):
    """The Rust tokenizer's batch call on a copy of ``tokenizer``'s own (which stays as it was), its
    settings fixed once (cut at ``max_length``, never padded), so threads may share it; without offsets
    where the library has that call."""
    import copy

    rust = copy.deepcopy(tokenizer.backend_tokenizer)
    if max_length:
        rust.enable_truncation(max_length)
    else:
        rust.no_truncation()
    rust.no_padding()
    return getattr(rust, "encode_batch_fast", rust.encode_batch)


class BatchTokens:
    """Texts tokenized as ``tokenizer(texts, truncation=True, max_length=max_length, padding=True)``
    tokenizes them (the model's input names, right- or left-padded as the tokenizer pads), by the
    fast tokenizer's own batch call. ``extra``: values every batch carries besides the tensors (a
    library's own keys). ``matches`` holds it to a reference on probe texts."""

    def __init__(self, tokenizer, max_length: int | None, extra: dict | None = None):
        self._unpadded = batch_encoder(tokenizer, max_length)
        self.names, self.extra = list(tokenizer.model_input_names), extra or {}
        self.pad = (tokenizer.pad_token_id or 0, getattr(tokenizer, "pad_token_type_id", 0))
        self.left = getattr(tokenizer, "padding_side", "right") == "left"

    def __call__(self, texts: Sequence[str]) -> dict:
        return self._padded(self._unpadded(list(texts)))

    def planned(
        self, texts: Sequence[str], batch_size: int | None, max_tokens: int | None = None
    ) -> list[tuple[list[int], dict]]:
        """The texts in batches of ``batch_size`` (or within ``max_tokens`` padded) planned by their token
        counts, longest first (``plan``), each as (positions in ``texts``, the batch ``self`` makes of them),
        tokenized once. Planned by characters instead, 256-token batches of real passages were a quarter to a
        third padding (``benchmarks/padding.py``): a text's characters say little of its word pieces."""
        encodings = self._unpadded(list(texts))
        lengths = [len(e.ids) for e in encodings]  # as ``counts``, from the encodings kept for the batches
        batches = plan(lengths, batch_size, max_tokens)
        return [(batch, self._padded([encodings[i] for i in batch])) for batch in batches]

    def counts(self, texts: Sequence[str]) -> list[int]:
        """Each text's token count as a batch here would hold it (cut at the length limit, unpadded)."""
        return [len(e.ids) for e in self._unpadded(list(texts))]

    def _padded(self, encodings: list) -> dict:
        """Encodings padded to the longest as the tokenizer pads them (its side, pad id and type)."""
        import torch

        lengths = np.fromiter((len(e.ids) for e in encodings), np.int64, len(encodings))
        width = int(lengths.max()) if len(lengths) else 0
        columns = np.arange(width)
        places = columns >= (width - lengths)[:, None] if self.left else columns < lengths[:, None]
        fields = {"input_ids": ("ids", self.pad[0]), "token_type_ids": ("type_ids", self.pad[1])}
        batch = {}
        for name in self.names:
            if name == "attention_mask":
                batch[name] = torch.from_numpy(places.astype(np.int64))
            elif name in fields:
                attribute, pad = fields[name]
                values = np.full((len(encodings), width), pad, dtype=np.int64)
                values[places] = np.fromiter(
                    (i for e in encodings for i in getattr(e, attribute)), np.int64, int(lengths.sum())
                )
                batch[name] = torch.from_numpy(values)
        return {**batch, **self.extra}

    def matches(self, reference, texts: list[str]) -> bool:
        """Whether batches made here (planned ones too: padded alike) equal ``reference(texts)`` (the
        library's own call), key by key."""
        own, built = reference(texts), self(texts)
        if set(own) != set(built):
            return False
        return all(
            np.array_equal(np.asarray(own[key]), np.asarray(value)) if hasattr(value, "shape") else own[key] == value
            for key, value in built.items()
        )

    @classmethod
    def checked(cls, tokenizer, max_length: int | None, reference, probe: list[str]) -> BatchTokens | None:
        """A ``BatchTokens`` for ``tokenizer`` that gives ``reference``'s batches on ``probe`` (the library's
        own keys carried along), or None: a tokenizer that is not a fast one, or whose batches differ."""
        if fast_backend(tokenizer) is None or not probe:
            return None
        try:
            own = reference(probe[:2])
            extra = {key: value for key, value in own.items() if not hasattr(value, "shape")}
            made = cls(tokenizer, max_length, extra)
            return made if made.matches(reference, probe) else None
        except (ValueError, TypeError, AttributeError):  # a tokenizer whose backend takes other settings
            return None


class TokenCache:
    """The ids of passage texts under one tokenizer (no special tokens, at most ``KEPT``), kept in
    ``<cache>/tokens/<identity>.sqlite``; ``folder=None`` keeps them in memory only. One connection
    serves every thread (``ifqa serve`` answers each request on a thread of its pool), one at a time;
    a forked process (a feed's worker) opens its own.

    A file found damaged (or made by another tokenizer) is made again, with a note; one that cannot be
    used (a cache that cannot be written, a full disk, another process holding it past a minute) is said
    once, and this process keeps its ids in memory: the cache saves time, it never stops a ranking."""

    def __init__(self, tokenizer, identity: str, folder: Path | None = None):
        self.tokenizer, self.identity = tokenizer, identity
        self._encode = batch_encoder(tokenizer)
        self.path = None if folder is None else Path(folder) / "tokens" / f"{identity[:24]}.sqlite"
        self._db: sqlite3.Connection | None = None
        self._pid, self._inherited = os.getpid(), None  # the process the connection was opened in
        self._memory: dict[bytes, np.ndarray] = {}
        self._lock = threading.Lock()

    def ids(self, texts: Sequence[str], need: int) -> list[np.ndarray]:
        """Each text's first ``need`` ids at least (all of them when it has fewer), int32."""
        keys = [hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest() for text in texts]
        found = self._use(lambda db: self._lookup(db, set(keys), need))
        missing = {key: text for key, text in zip(keys, texts) if key not in found}
        if missing:
            made = dict(zip(missing, self.tokenize(list(missing.values()))))
            found.update(made)
            self._use(lambda db: self._store(db, made))
        return [found[key] for key in keys]

    def tokenize(self, texts: list[str]) -> list[np.ndarray]:
        """The texts' ids by the Rust tokenizer's batch call (no special tokens, no truncation), kept nowhere."""
        made = []
        for start in range(0, len(texts), _BATCH):
            encoded = self._encode(texts[start : start + _BATCH], add_special_tokens=False)
            made.extend(np.asarray(e.ids, dtype="<i4") for e in encoded)
        return made

    def _use(self, action):
        """``action(db)`` under the lock (``db`` None: in memory), with the file's failures handled."""
        with self._lock:
            for _ in range(2):
                try:
                    return action(self._open())
                except (sqlite3.DatabaseError, OSError) as exc:
                    self._close()
                    if _unusable(exc):
                        log.warning(
                            "%s: the token cache cannot be used (%s); this run keeps passages' ids in memory "
                            "(make it writable, or move ifqa's cache with IFQA_CACHE_DIR)",
                            self.path.parent,
                            getattr(exc, "strerror", None) or exc,
                        )
                        self.path = None
                    else:  # not a database, a damaged page, another tokenizer's file
                        log.warning("%s: %s; tokenizing its passages again into a new one", self.path, exc)
                        self.path.unlink(missing_ok=True)
            self.path = None  # damaged again at once: this run goes on in memory
            return action(None)

    def _open(self) -> sqlite3.Connection | None:
        if self._db is not None and self._pid != os.getpid():  # a forked feed worker: a connection of its own
            self._inherited, self._db = self._db, None  # the parent's, kept open and unused (never closed here)
        if self.path is not None and self._db is None:
            self._pid = os.getpid()
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(self.path, timeout=60, isolation_level=None, check_same_thread=False)
            self._db.execute("CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT)")
            self._db.execute(
                "CREATE TABLE IF NOT EXISTS ids (key BLOB PRIMARY KEY, total INTEGER, crc INTEGER, ids BLOB)"
            )
            self._db.execute("INSERT OR IGNORE INTO meta VALUES ('tokenizer', ?)", (self.identity,))
            (recorded,) = self._db.execute("SELECT value FROM meta WHERE key = 'tokenizer'").fetchone()
            if recorded != self.identity:
                raise sqlite3.DatabaseError("made by another tokenizer")
        return self._db

    def _close(self) -> None:
        if self._db is not None:
            with contextlib.suppress(sqlite3.Error):
                self._db.close()  # an open transaction is rolled back with it
            self._db = None

    def _lookup(self, db: sqlite3.Connection | None, keys: set[bytes], need: int) -> dict[bytes, np.ndarray]:
        found = {key: self._memory[key] for key in keys if key in self._memory}
        wanted = [key for key in keys if key not in found]
        if db is None or not wanted:
            return found
        for start in range(0, len(wanted), _QUERY):
            part = wanted[start : start + _QUERY]
            rows = db.execute(
                f"SELECT key, total, crc, ids FROM ids WHERE key IN ({','.join('?' * len(part))})", part
            ).fetchall()
            for key, total, crc, blob in rows:
                ids = np.frombuffer(blob, dtype="<i4")
                if zlib.crc32(blob) != crc or not (len(ids) == total or len(ids) >= need):
                    continue  # damaged, or cut shorter than needed: tokenized again and replaced
                found[key] = ids
        return found

    def _store(self, db: sqlite3.Connection | None, made: dict[bytes, np.ndarray]) -> None:
        if db is None:
            self._memory.update(made)
            return
        rows = [(key, len(ids), zlib.crc32(blob := ids[:KEPT].tobytes()), blob) for key, ids in made.items()]
        db.execute("BEGIN")
        try:
            db.executemany("INSERT OR REPLACE INTO ids VALUES (?, ?, ?, ?)", rows)
            db.execute("COMMIT")
        finally:
            if db.in_transaction:  # failed or interrupted: nothing half-written stays open
                db.execute("ROLLBACK")


def _unusable(exc: BaseException) -> bool:
    """A failure of the place (permissions, space, a lock held too long), not of the file's content."""
    if isinstance(exc, OSError):
        return True
    words = ("readonly", "read-only", "unable to open", "disk", "locked", "busy", "i/o")
    return isinstance(exc, sqlite3.OperationalError) and any(word in str(exc).lower() for word in words)


class PairTokens:
    """(question, passage) pairs laid out from their ids as the tokenizer lays out a pair: its special
    tokens before, between and after, each part's token type, the passage cut to ``max_length`` as
    ``truncation="only_second"`` cuts it, right- or left-padded as the tokenizer pads."""

    def __init__(self, tokenizer, max_length: int):
        self.tokenizer, self.max_length = tokenizer, max_length
        first, second = (tokenizer(word, add_special_tokens=False)["input_ids"] for word in ("first", "second"))
        pair = tokenizer("first", "second")
        ids, types = pair["input_ids"], pair.get("token_type_ids")
        a = _find(ids, first, 0)
        b = _find(ids, second, a + len(first))
        if a < 0 or b < 0:
            raise ValueError("the tokenizer's pair does not hold its two parts in order")
        self.prefix, self.middle, self.suffix = ids[:a], ids[a + len(first) : b], ids[b + len(second) :]
        self.types = None
        if types is not None:
            self.types = (types[:a], types[a], types[a + len(first) : b], types[b], types[b + len(second) :])
        self.specials = len(self.prefix) + len(self.middle) + len(self.suffix)
        self.parts = tuple(np.asarray(part, np.int64) for part in (self.prefix, self.middle, self.suffix))
        self.pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
        self.left = getattr(tokenizer, "padding_side", "right") == "left"

    def room(self, question: np.ndarray, passage: np.ndarray) -> int | None:
        """How many of the passage's ids the pair holds, or None where the tokenizer would have to cut
        the question too (its own ``longest_first``, pair by pair)."""
        over = self.specials + len(question) + len(passage) - self.max_length
        if over <= 0:
            return len(passage)
        return len(passage) - over if over < len(passage) else None

    def rows(self, pairs: Sequence[tuple[np.ndarray, np.ndarray, int]]) -> dict:
        """A padded batch (tensors) of pairs given as (question ids, passage ids, passage ids kept): every
        pair's parts joined in one array and laid into the rows' unpadded places at once."""
        import torch

        n = len(pairs)
        asked = np.fromiter((len(q) for q, _, _ in pairs), np.int64, n)
        kept = np.fromiter((k for _, _, k in pairs), np.int64, n)
        lengths = self.specials + asked + kept
        width = int(lengths.max())
        places = np.arange(width) >= (width - lengths)[:, None] if self.left else np.arange(width) < lengths[:, None]
        prefix, middle, suffix = self.parts
        ids = np.full((n, width), self.pad, dtype=np.int64)
        ids[places] = np.concatenate([part for q, p, k in pairs for part in (prefix, q, middle, p[:k], suffix)])
        batch = {"input_ids": torch.from_numpy(ids), "attention_mask": torch.from_numpy(places.astype(np.int64))}
        if self.types is not None:  # each part's token type: prefix, first part, middle, second part, suffix
            t_prefix, t_first, t_middle, t_second, t_suffix = self.types
            runs = np.ones((n, len(t_prefix) + len(t_middle) + len(t_suffix) + 2), dtype=np.int64)
            runs[:, len(t_prefix)], runs[:, len(t_prefix) + 1 + len(t_middle)] = asked, kept
            values = np.array([*t_prefix, t_first, *t_middle, t_second, *t_suffix], dtype=np.int64)
            types = np.zeros((n, width), dtype=np.int64)
            types[places] = np.repeat(np.tile(values, n), runs.ravel())
            batch["token_type_ids"] = torch.from_numpy(types)
        return batch

    def matches(self, questions: list[str], texts: list[str]) -> bool:
        """Whether pairs built here equal the tokenizer's own (``only_second``, padded) on these pairs."""
        own = pair_inputs(self.tokenizer, questions, texts, self.max_length, padding=True, return_tensors="np")
        q_ids = [np.asarray(i, "<i4") for i in self.tokenizer(questions, add_special_tokens=False)["input_ids"]]
        p_ids = [np.asarray(i, "<i4") for i in self.tokenizer(texts, add_special_tokens=False)["input_ids"]]
        kept = [self.room(q, p) for q, p in zip(q_ids, p_ids)]
        if any(k is None for k in kept):
            return False
        built = self.rows([(q, p, k) for q, p, k in zip(q_ids, p_ids, kept)])
        return all(
            key in own and np.array_equal(np.asarray(own[key]), value.numpy()) for key, value in built.items()
        ) and set(own) <= set(built)


def _find(ids: list[int], part: list[int], start: int) -> int:
    for i in range(start, len(ids) - len(part) + 1):
        if ids[i : i + len(part)] == part:
            return i
    return -1
