"""ifqa from Python: the objects the command line and the notebooks are built on.

Every name here is importable from ``ifqa`` itself (``ifqa.open_index``, ...), loaded on first use
so ``import ifqa`` stays cheap. Results are typed: a search returns ``Hit`` objects (passage id,
title, text, score, rank), a pipeline returns run records (DPR's retrieval JSON, as ``ifqa
retrieve`` writes them), a reader returns predictions, the scorer returns the report ``ifqa
evaluate`` prints.

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
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from ifqa.artifacts import Example, QuestionSet, RunRecord, as_question_set
from ifqa.datasets import QuestionSource
from ifqa.errors import IfqaError

__all__ = [
    "Hit",
    "Searcher",
    "Pipeline",
    "Reranker",
    "load_questions",
    "open_index",
    "read",
    "evaluate_run",
    "evaluate_predictions",
    "exact_match",
    "f1",
    "IfqaError",
    "QuestionSet",
    "Example",
    "RunRecord",
]


@dataclass(frozen=True)
class Hit:
    """One retrieved passage: what pyserini calls a hit (``docid`` is ``id`` here)."""

    id: str
    title: str
    text: str
    score: float
    rank: int

    def as_context(self) -> dict:
        """The run-file form (``{"id", "title", "text", "score"}``)."""
        return {"id": self.id, "title": self.title, "text": self.text, "score": round(self.score, 6)}


def _hits(engine_hits: Sequence[tuple[int, float]], passages) -> list[Hit]:
    out = []
    for rank, (position, score) in enumerate(engine_hits, start=1):
        passage = passages[position]
        out.append(Hit(passage["id"], passage["title"], passage["text"], float(score), rank))
    return out


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
    source = QuestionSource(
        setting if not path or setting != "demo" else None,
        split,
        str(path) if path else None,
        str(data_dir) if data_dir else None,
    )
    return source.load()


class Searcher:
    """An index opened for searching: BM25 (bm25s, Lucene) or dense (FAISS), by folder or spec
    (``demo:bm25``, ``demo:dense``, ``prebuilt:NAME``, a folder from ``ifqa index``).

    >>> searcher = Searcher("demo:bm25")
    >>> [len(hits) for hits in searcher.batch_search(["Who built the bridge?", "copper"], k=2)]
    [2, 2]
    """

    def __init__(self, index: str | Path, corpus: str | Path | None = None, device: str | None = None):
        from ifqa.retrieval.specs import open_index as _open

        self.engine = _open(str(index), str(corpus) if corpus else None, device)

    @property
    def name(self) -> str:
        return self.engine.name

    @property
    def manifest(self) -> dict:
        return self.engine.manifest

    def __len__(self) -> int:
        return len(self.engine.passages)

    def passage(self, position: int) -> dict:
        """The passage at a position of the collection (``{"id", "title", "text"}``)."""
        return self.engine.passages[position]

    def search(self, question: str, k: int = 10) -> list[Hit]:
        return self.batch_search([question], k)[0]

    def batch_search(self, questions: Sequence[str], k: int = 10, threads: int = 1) -> list[list[Hit]]:
        if not questions:
            return []
        return [_hits(hits, self.engine.passages) for hits in self.engine.search(list(questions), k, threads)]


def open_index(index: str | Path, corpus: str | Path | None = None, device: str | None = None) -> Searcher:
    """``Searcher(index, corpus, device)``."""
    return Searcher(index, corpus, device)


class Pipeline:
    """The retrieval pipeline of ``ifqa retrieve``: query formulation, one or more indexes, fusion,
    reranking, from the same ``RetrievalConfig`` (or its fields as keywords).

    >>> pipeline = Pipeline(indexes=["demo:bm25"], k=5, query_mode="clean")
    >>> records = pipeline.run(load_questions("demo", "dev"))
    >>> len(records), len(records[0]["ctxs"]), sorted(records[0]["ctxs"][0])
    (24, 5, ['gold', 'has_answer', 'id', 'score', 'text', 'title'])
    """

    def __init__(self, config=None, **fields: Any):
        from ifqa.retrieval.pipeline import RetrievalConfig, RetrievalPipeline

        config = config or RetrievalConfig()
        self.config = replace(config, **fields) if fields else config
        self.pipeline = RetrievalPipeline(self.config)

    def search(self, question: str, k: int | None = None) -> list[Hit]:
        return _hits(self.pipeline.search([question], k)[0], self.pipeline.passages)

    def run(self, questions: QuestionSet | Sequence[Example]) -> list[RunRecord]:
        """Run records for every question (flags ``has_answer`` and ``gold`` from the questions)."""
        return list(self.pipeline.records(as_question_set(questions).examples))

    def run_to_file(
        self, questions: QuestionSet | Sequence[Example], output: str | Path, progress: bool = False
    ) -> list[RunRecord]:
        """As ``ifqa retrieve -o FILE``: the run file and its manifest, written atomically."""
        return self.pipeline.run_to_file(as_question_set(questions), output, progress)


class Reranker:
    """A cross-encoder (or the question-agnostic control) that reorders hits, as ``ifqa rerank``.

    ``backend``: ``torch``, or ``onnx``/``openvino``/``auto`` (``-int8``: ``auto-int8`` is the int8
    export measured fastest on this kind of CPU) on a CPU.
    """

    def __init__(
        self,
        model: str | Path,
        depth: int = 100,
        device: str | None = None,
        backend: str = "torch",
        batch_size: int | None = None,
        max_length: int | None = None,
    ):
        from ifqa.retrieval.rerank import load_reranker

        self.model = load_reranker(str(model), depth, batch_size, device, max_length, backend)

    def rerank(self, question: str, hits: Sequence[Hit]) -> list[Hit]:
        return self.rerank_many([question], [hits])[0]

    def rerank_many(self, questions: Sequence[str], hits_lists: Sequence[Sequence[Hit]]) -> list[list[Hit]]:
        """Several questions at once: their pairs are scored together (full batches on a GPU)."""
        from ifqa.retrieval.reordering import score_many

        depth = self.model.depth
        scores = score_many(
            self.model,
            [
                (q, [h.text for h in hits[:depth]], [h.score for h in hits[:depth]])
                for q, hits in zip(questions, hits_lists)
            ],
        )
        out = []
        for hits, values in zip(hits_lists, scores):
            head = sorted(zip(hits[:depth], values), key=lambda pair: -pair[1])
            ordered = [replace(hit, score=float(value)) for hit, value in head] + list(hits[depth:])
            out.append([replace(hit, rank=rank) for rank, hit in enumerate(ordered, start=1)])
        return out


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

    from ifqa.configs import from_options
    from ifqa.readers import ReadJob
    from ifqa.registry import READERS

    entry = READERS.get(reader)
    config = from_options(entry.config, {k: v for k, v in options.items() if v is not None})
    if questions is None or isinstance(questions, QuestionSource):
        source = questions or QuestionSource()
        question_set = source.load()
    else:  # a loaded set: its name says where it came from (demonstrations come from that setting's train split)
        question_set = as_question_set(questions)
        source = QuestionSource.parse(question_set.name)
    with tempfile.TemporaryDirectory() as tmp:
        target = Path(output) if output else Path(tmp) / "predictions.jsonl"
        entry.read(config, ReadJob(question_set, source, target, Path(run) if run else None, progress, api_key))
        return [json.loads(line) for line in target.read_text(encoding="utf-8").splitlines() if line.strip()]


def evaluate_run(
    run: str | Path | Iterable[Mapping[str, Any]],
    questions: QuestionSet | Sequence[Example] | None = None,
    compare: str | Path | Iterable[Mapping[str, Any]] | None = None,
) -> dict:
    """Recall@K (gold passage and answer string) of a run file or of run records, as ``ifqa evaluate
    --run``: the run's own flags, or flags recomputed from ``questions``; with ``compare`` (a baseline
    run), gold recall@1/5/20 with 95% intervals and the paired permutation test under ``"compare"``.

    >>> report = evaluate_run(Pipeline(k=20).run(load_questions()), load_questions())
    >>> report["n"], sorted(report["recall"])
    (24, ['answer', 'gold'])
    """
    from ifqa.eval.summary import compare_runs, summarize_run

    examples = as_question_set(questions).examples if questions is not None else None
    records = _run_records(run)
    report = summarize_run(records, examples)
    if compare is not None:
        baseline = _run_records(compare)
        if examples is not None:
            summarize_run(baseline, examples)  # the baseline's flags recomputed from the same questions
        report["compare"] = {
            "baseline": str(compare) if isinstance(compare, (str, Path)) else "records",
            **compare_runs(records, baseline),
        }
    return report


def _run_records(run: str | Path | Iterable[Mapping[str, Any]]) -> list:
    from ifqa.artifacts import read_run

    return read_run(run) if isinstance(run, (str, Path)) else list(run)


def evaluate_predictions(
    predictions: str | Path | Mapping[str, str] | Iterable[Mapping[str, Any]],
    questions: QuestionSet | Sequence[Example],
    compare: str | Path | Mapping[str, str] | Iterable[Mapping[str, Any]] | None = None,
) -> dict:
    """The ``ifqa evaluate --predictions`` report, its metric chosen by the questions' dataset (IfQA:
    EM/F1 with 95% intervals and breakdowns; WIQA: accuracy by question type and path length;
    CausalQA: ROUGE-L, EM/F1 by source). ``predictions`` (and ``compare``, for the paired test) is a
    file, a ``{qid: answer}`` mapping or prediction records; objects are read by the same rules as files.

    >>> dev = load_questions()
    >>> evaluate_predictions({e.qid: e.answers[0] for e in dev}, dev)["em"]
    100.0
    """
    from ifqa.eval.tasks import task_for

    question_set = as_question_set(questions)
    task = task_for(question_set)
    answers = _task_predictions(task, predictions)
    other = _task_predictions(task, compare) if compare is not None else None
    qids = {example.qid for example in question_set.examples}
    for name, given, found in (("predictions", predictions, answers), ("compare", compare, other)):
        if found is not None and not qids & set(found):  # another set's predictions score 0, silently
            where = f"{given}: " if isinstance(given, (str, Path)) else ""
            raise IfqaError(
                f"{where}{name} answer none of the {len(qids)} questions of {question_set.name} "
                f"(first qid {next(iter(found))!r}); name the questions they were made for"
            )
    return task.summarize(question_set.examples, answers, other)


def _task_predictions(task, predictions) -> Mapping[str, str]:
    """``qid -> answer`` as the task reads a predictions file (WIQA: labels checked and normalized)."""
    if isinstance(predictions, (str, Path)):
        return task.read(predictions)
    import json

    records = (
        [{"qid": qid, "prediction": answer} for qid, answer in predictions.items()]
        if isinstance(predictions, Mapping)
        else list(predictions)
    )
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "predictions.jsonl"
        path.write_text("".join(json.dumps(record, ensure_ascii=False) + "\n" for record in records), encoding="utf-8")
        try:
            return task.read(path)
        except IfqaError as exc:  # name the record, not the temporary file
            raise IfqaError(str(exc).replace(f"{path}:", "predictions, record ", 1)) from None


def exact_match(prediction: str, answers: Sequence[str]) -> float:
    """1.0 when the normalized prediction equals a normalized answer (SQuAD's rule), else 0.0.

    >>> exact_match("The Hudson river", ["Hudson River"])
    1.0
    """
    from ifqa.eval.answers import best_over_answers
    from ifqa.eval.answers import exact_match as em

    return best_over_answers(em, prediction, list(answers))


def f1(prediction: str, answers: Sequence[str]) -> float:
    """The best token F1 over the answers (SQuAD's rule).

    >>> round(f1("Hudson", ["Hudson River"]), 3)
    0.667
    """
    from ifqa.eval.answers import best_over_answers, token_f1

    return best_over_answers(token_f1, prediction, list(answers))
