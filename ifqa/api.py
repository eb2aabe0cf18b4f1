"""ifqa from Python: the objects the command line and the notebooks are built on, each importable
from ``ifqa`` itself. Results are typed: a search returns ``Hit`` objects, a pipeline run records (as
``ifqa retrieve`` writes them), a reader predictions, the scorer the report ``ifqa evaluate`` prints.

>>> import ifqa
>>> questions = ifqa.load_questions("demo", "dev")
>>> len(questions), questions[0].qid
(24, '0')
>>> searcher = ifqa.open_index("demo:bm25")
>>> hits = searcher.search(questions[0].question, k=3)
>>> [hit.rank for hit in hits], isinstance(hits[0].text, str)
([1, 2, 3], True)
"""

from __future__ import annotations

import tempfile
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from ifqa import _API
from ifqa import arguments as arg
from ifqa.arguments import checked
from ifqa.artifacts import Example, QuestionSet, RunRecord, as_question_set, check_questions
from ifqa.configs import changed, document_fields, from_options
from ifqa.datasets import QuestionSource, questions_for
from ifqa.errors import IfqaError  # noqa: F401 (public: __all__)
from ifqa.evaluation import evaluate_predictions, evaluate_run, exact_match, f1  # noqa: F401
from ifqa.outputs import check_output
from ifqa.registry import READERS
from ifqa.retrieval.config import RetrievalConfig
from ifqa.retrieval.hits import Hit, hits_at
from ifqa.retrieval.pipeline import RetrievalPipeline
from ifqa.retrieval.reordering import RerankerKind
from ifqa.retrieval.specs import open_index as open_engine

__all__ = list(_API)  # one list: ifqa/__init__.py loads each of these from here


def _hit_list(name: str, value: Any) -> list[Hit]:
    """Hits as a search returns them (``Hit`` objects), for a reranker."""
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence):
        raise TypeError(f"{name} must be a list of Hit, not {type(value).__name__}")
    for i, hit in enumerate(value):
        if not isinstance(hit, Hit):
            raise TypeError(f"{name}[{i}] must be a Hit (from a search), not {type(hit).__name__}")
        if not isinstance(hit.text, str):  # a reranker reads the text
            raise TypeError(f"{name}[{i}].text must be a str, not {type(hit.text).__name__}")
    return list(value)


def _hit_lists(name: str, value: Any) -> list[list[Hit]]:
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence):
        raise TypeError(f"{name} must be a list of lists of Hit, not {type(value).__name__}")
    return [_hit_list(f"{name}[{i}]", hits) for i, hits in enumerate(value)]


@checked(
    setting=arg.optional(arg.text),
    split=arg.optional(arg.text),
    path=arg.optional(arg.path_like),
    data_dir=arg.optional(arg.path_like),
)
def load_questions(
    setting: str | None = "demo",
    split: str | None = None,
    path: str | Path | None = None,
    data_dir: str | Path | None = None,
) -> QuestionSet:
    """The questions of a dataset split (``supervised``, ``few-shot``, ``demo``, ``wiqa``, ``causalqa``
    ...; the split defaults to the dataset's own), or of a file in the IfQA format (``path``).

    >>> load_questions("demo", "train").name
    'demo:train'
    """
    file, folder = str(path) if path else None, str(data_dir) if data_dir else None
    return QuestionSource(setting if not path or setting != "demo" else None, split, file, folder).load()


class Searcher:
    """An index opened for searching: BM25 (bm25s, Lucene) or dense (FAISS), by folder or spec
    (``demo:bm25``, ``demo:dense``, ``prebuilt:NAME``, a folder from ``ifqa index``).

    >>> searcher = Searcher("demo:bm25")
    >>> [len(hits) for hits in searcher.batch_search(["Who built the bridge?", "copper"], k=2)]
    [2, 2]
    """

    @checked(index=arg.path_like, corpus=arg.optional(arg.path_like), device=arg.device)
    def __init__(self, index: str | Path, corpus: str | Path | None = None, device: str | None = None):
        self.engine = open_engine(str(index), str(corpus) if corpus else None, device)

    @property
    def name(self) -> str:
        """The index's name (``bm25:demo-bm25``, ``dense:NAME``)."""
        return self.engine.name

    @property
    def manifest(self) -> dict:
        """What built the index: engine, parameters, collection (its path, size and checksum)."""
        return self.engine.manifest

    def __len__(self) -> int:
        """Passages in the collection."""
        return len(self.engine.passages)

    def __repr__(self) -> str:
        return f"Searcher({self.name!r}, {self.manifest.get('engine')}, {len(self):,} passages)"

    @checked(position=arg.position)
    def passage(self, position: int) -> dict:
        """The passage at a position of the collection (``{"id", "title", "text"}``)."""
        if not 0 <= position < len(self):
            raise ValueError(f"position {position} is outside the collection (0 to {len(self) - 1})")
        return self.engine.passages[position]

    @checked(question=arg.text, k=arg.count)
    def search(self, question: str, k: int = 10) -> list[Hit]:
        """The ``k`` best passages for ``question``, as ``Hit``s ranked from 1."""
        return self.batch_search([question], k)[0]

    @checked(questions=arg.texts, k=arg.count, threads=arg.count)
    def batch_search(self, questions: Sequence[str], k: int = 10, threads: int = 1) -> list[list[Hit]]:
        """``search`` for several questions at once (``threads``: the engine's, for BM25 and FAISS)."""
        if not questions:
            return []
        passage = self.engine.passages.__getitem__
        return [hits_at(hits, passage) for hits in self.engine.search(list(questions), k, threads)]


@checked(index=arg.path_like, corpus=arg.optional(arg.path_like), device=arg.device)
def open_index(index: str | Path, corpus: str | Path | None = None, device: str | None = None) -> Searcher:
    """``Searcher(index, corpus, device)``."""
    return Searcher(index, corpus, device)


def _searchers(name: str, value: Any) -> list | None:
    """Opened indexes for a pipeline: ``Searcher`` objects (or engines)."""
    if value is None:
        return None
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence):
        raise TypeError(f"{name} must be a list of Searcher (from open_index), not {type(value).__name__}")
    return [getattr(searcher, "engine", searcher) for searcher in value]


def _subqueries(name: str, value: Any) -> list[list[str]]:
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence):
        raise TypeError(f"{name} must be a list of lists of queries, not {type(value).__name__}")
    return [arg.texts(f"{name}[{i}]", queries) for i, queries in enumerate(value)]


def _rerankers(name: str, value: Any) -> list:
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence):
        raise TypeError(f"{name} must be a list of Reranker, not {type(value).__name__}")
    kinds = [getattr(reranker, "model", reranker) for reranker in value]  # ifqa.Reranker holds its kind
    for i, kind in enumerate(kinds):
        if not isinstance(kind, RerankerKind):
            raise TypeError(f"{name}[{i}] must be a Reranker, not {type(value[i]).__name__}")
    return kinds


class Pipeline(RetrievalPipeline):
    """The retrieval pipeline of ``ifqa retrieve``, ``ifqa serve`` and experiments' retrieve stages:
    query formulation, one or more indexes, fusion, reranking, from a ``RetrievalConfig`` (or its
    fields as keywords). ``searchers``/``rerankers``: already opened ones to use instead.

    >>> pipeline = Pipeline(indexes=["demo:bm25"], k=5, query_mode="clean")
    >>> records = pipeline.run(load_questions("demo", "dev"))
    >>> len(records), len(records[0]["ctxs"]), sorted(records[0]["ctxs"][0])
    (24, 5, ['gold', 'has_answer', 'id', 'score', 'text', 'title'])
    """

    @checked(config=arg.optional(arg.one_of(RetrievalConfig)), searchers=_searchers, rerankers=_rerankers)
    def __init__(self, config=None, searchers=None, rerankers=(), **fields: Any):
        config = config or RetrievalConfig()
        super().__init__(replace(config, **fields) if fields else config, searchers, rerankers)

    def __repr__(self) -> str:
        """The settings that differ from ``ifqa retrieve``'s defaults, as the command would take them."""
        settings = [f"{field.name}={value!r}" for field, value in changed(self.config)]
        return f"Pipeline({', '.join(settings) or 'the defaults of ifqa retrieve'})"

    @checked(question=arg.text, k=arg.optional(arg.count))
    def search(self, question: str, k: int | None = None) -> list[Hit]:
        """The hits of one question through every stage (queries, indexes, fusion, reranking);
        ``k`` defaults to the pipeline's."""
        return self.batch_search([question], k)[0]

    @checked(questions=arg.texts, k=arg.optional(arg.count), subqueries=arg.optional(_subqueries))
    def batch_search(
        self, questions: Sequence[str], k: int | None = None, subqueries: Sequence[Sequence[str]] | None = None
    ) -> list[list[Hit]]:
        """Several questions at once (``subqueries``: their query formulations, when already made)."""
        if subqueries is not None and len(subqueries) != len(questions):
            raise ValueError(f"{len(questions)} questions but {len(subqueries)} subquery lists")
        return super().batch_search(questions, k, subqueries)

    @checked(questions=arg.questions)
    def run(self, questions: QuestionSet | Sequence[Example]) -> list[RunRecord]:
        """Run records for every question (flags ``has_answer`` and ``gold`` from the questions)."""
        return list(self._records(as_question_set(questions).examples))

    @checked(questions=arg.questions, output=arg.path_like, progress=arg.flag)
    def run_to_file(
        self, questions: QuestionSet | Sequence[Example], output: str | Path, progress: bool = False
    ) -> list[RunRecord]:
        """As ``ifqa retrieve -o FILE``: the run file and its manifest, written atomically."""
        from dataclasses import asdict

        question_set = as_question_set(questions)
        check_output(output, {"questions": question_set.name, **asdict(self.config)}, "output")
        return super().run_to_file(question_set, output, progress)


class Reranker:
    """A cross-encoder (or the question-agnostic control) that reorders hits, as ``ifqa rerank``;
    ``runtime`` and ``precision`` as ``--rerank-runtime`` and ``--rerank-precision`` take them
    (``backend``, the runtime's former name, still works); ``max_batch_tokens`` as ``ifqa rerank`` takes it."""

    @checked(
        model=arg.path_like,
        depth=arg.count,
        device=arg.device,
        runtime=arg.text,
        batch_size=arg.optional(arg.count),
        max_length=arg.optional(arg.count),
        precision=arg.text,
        backend=arg.optional(arg.text),
        max_batch_tokens=arg.optional(arg.count),
    )
    def __init__(
        self,
        model: str | Path,
        depth: int = 100,
        device: str | None = None,
        runtime: str = "torch",
        batch_size: int | None = None,
        max_length: int | None = None,
        precision: str = "auto",
        backend: str | None = None,
        max_batch_tokens: int | None = None,
    ):
        from ifqa.retrieval.rerank import load_reranker  # loaded on first use: `import ifqa` stays light

        if backend is not None:  # the former name of runtime
            import warnings

            warnings.warn("Reranker(backend=) is now Reranker(runtime=)", DeprecationWarning, stacklevel=2)
            runtime = backend
        how = {"batch_size": batch_size, "device": device, "max_length": max_length, "precision": precision}
        self.model = load_reranker(str(model), depth, backend=runtime, max_batch_tokens=max_batch_tokens, **how)

    @property
    def depth(self) -> int:
        """First-stage passages re-scored per question."""
        return self.model.depth

    def describe(self) -> dict:
        """What makes the scores, as the run's manifest records it (model, depth, precision, backend)."""
        return self.model.describe()

    def __repr__(self) -> str:
        described = self.describe()
        return "Reranker(" + ", ".join(f"{key}={value!r}" for key, value in described.items()) + ")"

    @checked(question=arg.text, hits=_hit_list)
    def rerank(self, question: str, hits: Sequence[Hit]) -> list[Hit]:
        """``hits`` reordered by this reranker's scores (the top ``depth`` re-scored, the rest after)."""
        return self.rerank_many([question], [hits])[0]

    @checked(questions=arg.texts, hits_lists=_hit_lists, progress=arg.flag)
    def rerank_many(
        self, questions: Sequence[str], hits_lists: Sequence[Sequence[Hit]], progress: bool = False
    ) -> list[list[Hit]]:
        """Several questions at once: their pairs are scored together (full batches on a GPU).
        ``progress``: a bar over the questions (minutes of CPU time for a few dozen at depth 100);
        the scores are the same either way (a pair's score does not depend on its batch)."""
        if len(questions) != len(hits_lists):
            raise ValueError(f"{len(questions)} questions but {len(hits_lists)} hit lists: give one list per question")
        if not progress:
            return self.model.rerank_many(questions, hits_lists)
        from tqdm import tqdm

        from ifqa.retrieval.rerank_run import questions_per_group  # loaded on first use: `import ifqa` stays light

        per_group = questions_per_group(self.model)
        out: list[list[Hit]] = []
        with tqdm(total=len(questions), desc="rerank", unit="q") as bar:
            for start in range(0, len(questions), per_group):
                out += self.model.rerank_many(
                    questions[start : start + per_group], hits_lists[start : start + per_group]
                )
                bar.update(min(per_group, len(questions) - start))
        return out

    @checked(run=arg.path_like, output=arg.path_like, questions=arg.optional(arg.questions), progress=arg.flag)
    def rerank_run(
        self, run: str | Path, output: str | Path, questions: QuestionSet | None = None, progress: bool = False
    ) -> int:
        """As ``ifqa rerank``: every question of a run file reordered into ``output`` (resumable). The
        questions default, as the command's do, to the set the run's manifest records; a run made for
        other questions is refused. Returns the questions written."""
        from ifqa.retrieval.rerank_run import read_rerankable, rerank_run  # loaded on first use: stays light

        check_output(output, {"run": run, "model": self.model.name}, "output")
        records = read_rerankable(run, self.depth)  # parsed once
        if questions is None:
            questions = questions_for(run, QuestionSource(), records)
        else:
            questions = as_question_set(questions)
            check_questions(run, questions, records)
        return len(rerank_run(run, self.model, output, questions, progress, records))


def _reader_questions(name: str, value: Any):
    return value if value is None or isinstance(value, QuestionSource) else arg.questions(name, value)


@checked(
    reader=arg.text,
    questions=_reader_questions,
    run=arg.optional(arg.path_like),
    output=arg.optional(arg.path_like),
    api_key=arg.optional(arg.text),
    progress=arg.flag,
)
def read(
    reader: str,
    questions: QuestionSet | QuestionSource | None = None,
    run: str | Path | None = None,
    output: str | Path | None = None,
    progress: bool = False,
    api_key: str | None = None,
    **options: Any,
) -> list[dict]:
    """Answer ``questions`` with a registered reader (``llm``, ``fid``, ``majority``), configured by its
    options as on the command line (``model``, ``mode``, ``checkpoint``, ...); returns the predictions
    (``{"qid", "prediction", ...}``) and writes them to ``output`` (a temporary file when None).

    >>> predictions = read("majority", load_questions("demo", "dev"))
    >>> len(predictions), sorted(predictions[0])[:2]
    (24, ['prediction', 'qid'])
    """
    import json

    from ifqa.readers import ReadJob  # loaded on first use: `import ifqa` stays light

    entry = READERS.get(reader)
    config = from_options(entry.config, {k: v for k, v in options.items() if v is not None})
    if questions is None or isinstance(questions, QuestionSource):
        source = questions or QuestionSource()
        question_set = source.load()
    else:  # a loaded set: its name says where it came from (demonstrations come from that setting's train split)
        question_set = as_question_set(questions)
        source = QuestionSource.parse(question_set.name)
    check_output(output, {"questions": question_set.name, "run": run, **options}, "output")
    with tempfile.TemporaryDirectory() as tmp:
        target = Path(output) if output else Path(tmp) / "predictions.jsonl"
        entry.read(config, ReadJob(question_set, source, target, Path(run) if run else None, progress, api_key))
        return [json.loads(line) for line in target.read_text(encoding="utf-8").splitlines() if line.strip()]


document_fields(Pipeline, RetrievalConfig)  # help(Pipeline) lists the settings it takes


@checked(
    predictions=arg.path_like,
    questions=arg.questions,
    output=arg.path_like,
    twins=arg.path_like,
    twin_predictions=arg.optional(arg.path_like),
    api_key=arg.optional(arg.text),
    progress=arg.flag,
)
def analyze_premise(
    predictions: str | Path,
    questions: QuestionSet | Sequence[Example],
    output: str | Path,
    twins: str | Path = "rule",
    twin_predictions: str | Path | None = None,
    api_key: str | None = None,
    progress: bool = False,
) -> dict:
    """``ifqa analyze premise``: each counterfactual prediction correct, memory (the model's own answer
    to the question's factual twin) or other, with intervals and breakdowns; ``twins``: ``"rule"``, ``"llm"``
    (written by the predictions' own model) or a ``{qid, question}`` file; ``twin_predictions``: the same reader's answers to them (default: the
    predictions' model answers them closed-book). Writes the folder ``output``; returns the report.

    >>> import json, tempfile
    >>> folder, dev = tempfile.mkdtemp(), load_questions("demo", "dev")
    >>> _ = read("majority", dev, output=f"{folder}/majority.jsonl")
    >>> lines = "".join(json.dumps({"qid": e.qid, "prediction": "1828"}) + "\\n" for e in dev)
    >>> _ = open(f"{folder}/twins-answered.jsonl", "w").write(lines)
    >>> report = analyze_premise(f"{folder}/majority.jsonl", dev, f"{folder}/premise",
    ...                          twin_predictions=f"{folder}/twins-answered.jsonl")
    >>> report["all"]["memory"]  # the majority answer is what it gives without the premise too
    100.0
    """
    from ifqa.analysis import premise  # loaded on first use: `import ifqa` stays light

    question_set = as_question_set(questions)
    check_output(output, {"predictions": predictions, "twins": twins, "twin_predictions": twin_predictions}, "output")
    return premise.analyze(predictions, question_set, output, twins, twin_predictions, api_key, progress)


@checked(data=arg.shareable)
def to_dataset(data: QuestionSet | Sequence[Example] | Sequence[dict] | str | Path):
    """A question set (``qid``, ``question``, ``answers``, ``context``), run records or predictions
    (a list, or their JSONL file) as a 🤗 ``datasets.Dataset``, to share with ``.push_to_hub`` or
    ``.to_parquet``; ``--questions hf:FOLDER`` reads a question set saved so back.

    >>> dataset = to_dataset(load_questions("demo", "dev"))
    >>> dataset.num_rows, dataset.column_names
    (24, ['qid', 'question', 'answers', 'context'])
    """
    from ifqa.datasets.export import to_dataset as convert  # loaded on first use: `import ifqa` stays light

    return convert(data)
