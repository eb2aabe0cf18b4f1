"""BM25 with bm25s: sparse matrices in numpy, memory-mapped at load, scored in parallel threads.

Tokenization is set to mirror Lucene's EnglishAnalyzer as pyserini uses it (lowercase, Lucene's 33
English stopwords, Porter stemming, single-character tokens kept) with pyserini's defaults k1=0.9,
b=0.4 and Lucene's idf, so the two engines rank alike. Title and text are indexed together.
Possessive 's is dropped before splitting, as Lucene's EnglishPossessiveFilter does, and tokens
follow the common cases of Lucene's StandardTokenizer (UAX#29): "1,000", "3.14", "U.S." and
"don't" stay one token. On mini-wiki this lifts the top-20 overlap with pyserini from 0.90 (plain
word-character tokens) to 0.98 (benchmarks/retrieval.py).
"""

from __future__ import annotations

import array
import logging
import re
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from ifqa.artifacts import UniqueIds
from ifqa.retrieval import BM25_B, BM25_K1
from ifqa.retrieval.engines import BM25Settings, settings_of
from ifqa.retrieval.index import OFFSETS, Positions, StagedBuild, StagedEngine, passage_store
from ifqa.retrieval.store import PassageStore, iter_corpus, release_pages
from ifqa.retrieval.vocabulary import SortedVocabulary, has_sorted

log = logging.getLogger(__name__)

DEFAULT_PARAMS = {
    "k1": BM25_K1,
    "b": BM25_B,
    "method": "lucene",
    "stemmer": "porter",
    "stopwords": "en",
    "token_pattern": r"(?u)\d+(?:[.,]\d+)+|\w+(?:['\u2019.]\w+)*",
    "possessives": True,
}
_POSSESSIVE = re.compile(r"(\w)['\u2019]s\b")


def analyzer(params: dict = DEFAULT_PARAMS):
    """The bm25s tokenizer for these index parameters (Lucene-like, see the module docstring)."""
    import Stemmer
    from bm25s.tokenization import Tokenizer

    logging.getLogger("bm25s").setLevel(logging.WARNING)  # bm25s sets DEBUG on import; keep its per-call lines out
    token = re.compile(params["token_pattern"])
    if params.get("possessives"):

        def splitter(text: str) -> list[str]:
            return token.findall(_POSSESSIVE.sub(r"\1", text))
    else:
        splitter = token.findall
    stemmer = Stemmer.Stemmer(params["stemmer"]) if params["stemmer"] else None
    return Tokenizer(lower=True, splitter=splitter, stopwords=params["stopwords"], stemmer=stemmer)


def document_text(passage: dict) -> str:
    """What gets indexed for a passage: its title and its text, as DPR's Wikipedia indexes do."""
    return f"{passage['title']}\n{passage['text']}" if passage["title"] else passage["text"]


class MemoryBM25:
    """BM25 over a few thousand texts held in memory (demonstration pools, training gold passages),
    with the same analyzer and parameters as the on-disk indexes."""

    def __init__(self, texts: Sequence[str]):
        import bm25s
        from bm25s.tokenization import Tokenized

        self.size = len(texts)
        self.tokenizer = analyzer(DEFAULT_PARAMS)
        ids = self.tokenizer.tokenize(list(texts), update_vocab=True, return_as="ids", show_progress=False)
        self.model = bm25s.BM25(k1=DEFAULT_PARAMS["k1"], b=DEFAULT_PARAMS["b"], method=DEFAULT_PARAMS["method"])
        self.model.index(Tokenized(ids=ids, vocab=self.tokenizer.get_vocab_dict()), show_progress=False)

    def top(self, query: str, k: int) -> list[int]:
        """Positions of the ``k`` best-scoring texts, best first (ties and zero scores in bm25s's order;
        none when no query word is known)."""
        tokens = self.tokenizer.tokenize([query], update_vocab=False, return_as="string", show_progress=False)[0]
        words = [w for w in tokens if w]
        if not words or not self.size or k < 1:
            return []
        documents, _ = self.model.retrieve([words], k=min(k, self.size), show_progress=False)
        return [int(d) for d in documents[0]]


class QueryTerms:
    """A question's index terms, as bm25s's tokenizer gives them with ``update_vocab=False``
    (lowercased, split, stopwords dropped, stemmed, terms the collection lacks dropped), read
    against the index's own vocabulary: the tokenizer's saved word lists (9.5 MB of JSON on
    mini-wiki, 0.6 s to load) map to the same stems and are never needed to search. Returns the
    terms' ids (``vocabulary``: bm25s's dict, or ``vocabulary.SortedVocabulary``)."""

    def __init__(self, tokenizer, vocabulary):
        self.split, self.stem = tokenizer.splitter, tokenizer.stemmer
        self.stopwords, self.vocabulary = frozenset(tokenizer.stopwords or ()), vocabulary
        self._ids: dict[str, int | None] = {}  # word -> its stem's id (None: not in the index)

    def __call__(self, question: str) -> list[int]:
        ids = []
        for word in self.split(question.lower()):
            if word in self.stopwords:
                continue
            if word not in self._ids:
                stem = self.stem(word) if self.stem else word
                self._ids[word] = self.vocabulary.get(stem) if stem else None
            if self._ids[word] is not None:
                ids.append(self._ids[word])
        return ids


class BM25Retriever(StagedEngine):
    """The bm25s engine (``ENGINES["bm25s"]``): a loaded index (memory-mapped) with its query
    analyzer and passage store."""

    ENGINE, Settings = "bm25s", BM25Settings

    @staticmethod
    def params(settings: BM25Settings) -> dict:
        return {**DEFAULT_PARAMS, "k1": settings.k1, "b": settings.b}

    @classmethod
    def write(cls, build: StagedBuild, settings: BM25Settings, chunk_docs: int | None = None) -> tuple[int, dict]:
        """bm25s's files (``bm25_build``: the same ones bm25s's own indexer writes), ``chunk_docs`` passages in
        memory at a time (default ``bm25_build.DEFAULT_CHUNK_DOCS``)."""
        from tqdm import tqdm

        from ifqa.retrieval.bm25_build import DEFAULT_CHUNK_DOCS, build_scores  # the build's own code

        params, total = cls.params(settings), build.record["bytes"]
        tokenizer, offsets, ids = analyzer(params), array.array("q"), UniqueIds(build.corpus)
        bar = tqdm(total=total, unit="B", unit_scale=True, desc="bm25 index", disable=not build.progress)

        def documents():
            last = 0
            for offset, passage in iter_corpus(build.corpus):
                offsets.append(offset)
                ids.add(passage["id"])
                if len(offsets) % 10000 == 0:
                    bar.update(offset - last)
                    last = offset
                yield document_text(passage)
            bar.update(total - last)

        build_scores(documents(), tokenizer, build.folder, settings.k1, settings.b, chunk_docs or DEFAULT_CHUNK_DOCS)
        bar.close()
        ids.check(lambda: (passage["id"] for _, passage in iter_corpus(build.corpus)))
        tokenizer.save_vocab(str(build.folder))
        tokenizer.save_stopwords(str(build.folder))
        np.save(build.folder / OFFSETS, np.frombuffer(offsets, dtype=np.int64))
        return len(offsets), {}

    def __init__(self, model, terms: QueryTerms, manifest: dict, passages: PassageStore, name: str):
        self.model, self.terms, self.manifest, self.passages, self.name = model, terms, manifest, passages, name

    @classmethod
    def load(
        cls, index_dir: str | Path, manifest: dict, corpus: str | Path | None = None, device: str | None = None
    ) -> BM25Retriever:
        import bm25s

        settings_of(cls, manifest, Path(index_dir))  # what it was built with, checked (bm25s reads its own copy)
        lean = has_sorted(Path(index_dir))  # indexes built before it keep bm25s's dict
        model = bm25s.BM25.load(str(index_dir), mmap=True, load_vocab=not lean, show_progress=False, verbosity=0)
        vocabulary = SortedVocabulary(Path(index_dir)) if lean else model.vocab_dict
        if lean:  # the ids bm25s accepts in a question: every term's (a range, not a set of millions)
            model.unique_token_ids_set = range(len(model.scores["indptr"]) - 1)
        terms = QueryTerms(analyzer(manifest["params"]), vocabulary)
        return cls(
            model, terms, manifest, passage_store(Path(index_dir), manifest, corpus), f"bm25:{Path(index_dir).name}"
        )

    def search(self, queries: Sequence[str], k: int, threads: int = 1) -> list[Positions]:
        k = min(k, len(self.passages))
        tokens = [self.terms(query) for query in queries]
        results: list[Positions] = [[] for _ in queries]
        answerable = [i for i, words in enumerate(tokens) if words]  # all-stopword queries match nothing
        if answerable:
            documents, scores = self.model.retrieve(
                [tokens[i] for i in answerable], k=k, n_threads=threads, show_progress=False
            )
            for row, i in enumerate(answerable):
                results[i] = [(int(d), float(s)) for d, s in zip(documents[row], scores[row]) if s > 0]
            release_pages(self.model.scores.values())
        return results


build = BM25Retriever.build  # ``bm25.build(corpus, folder, settings, ...)``, as the engine builds
