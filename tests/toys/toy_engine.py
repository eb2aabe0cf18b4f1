"""A toy engine: everything a new index engine needs (``Settings``, ``build``, ``load``, ``search``),
in one module. ``ifqa index toy``, ``ifqa retrieve``, an experiment's ``index`` stage and
``ifqa serve`` use it once one registry line names it (tests/test_architecture.py)."""

import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ifqa.configs import option
from ifqa.retrieval.engines import settings_of
from ifqa.retrieval.index import OFFSETS, corpus_record, finish_manifest, passage_store, staging
from ifqa.retrieval.store import iter_corpus


@dataclass(frozen=True)
class ToySettings:
    lowercase: bool = option(True, "Match words as written.", flag="--case-sensitive")
    min_shared: int = option(1, "Words a passage must share with the query to be returned.", min=1)


class ToyRetriever:
    """Scores a passage by the words it shares with the query."""

    Settings = ToySettings

    @classmethod
    def build(cls, corpus, folder, settings, *, progress=True, force=False):
        started = time.time()
        record = corpus_record(Path(corpus))
        with staging(folder, force) as temporary:
            np.save(temporary / OFFSETS, np.asarray([offset for offset, _ in iter_corpus(corpus)], dtype=np.int64))
            params = {"lowercase": settings.lowercase, "min_shared": settings.min_shared}
            return finish_manifest(temporary, "toy", params, record, len(np.load(temporary / OFFSETS)), started)

    def __init__(self, manifest, passages, name, settings):
        self.manifest, self.passages, self.name, self.settings = manifest, passages, name, settings

    @classmethod
    def load(cls, folder, manifest, corpus=None, device=None):
        store = passage_store(Path(folder), manifest, corpus)
        return cls(manifest, store, f"toy:{Path(folder).name}", settings_of(cls, manifest, folder))

    def _words(self, text):
        text = text.lower() if self.settings.lowercase else text
        return set(text.replace("?", " ").replace(".", " ").split())

    def search(self, queries, k, threads=1):
        results = []
        for query in queries:
            words = self._words(query)
            scores = [(i, float(len(words & self._words(self.passages[i]["text"])))) for i in range(len(self.passages))]
            kept = [pair for pair in scores if pair[1] >= self.settings.min_shared]
            results.append(sorted(kept, key=lambda s: -s[1])[:k])
        return results
