"""Scoring from Python (the ``ifqa evaluate`` reports, EM and F1), part of the public API: every name
here is importable from ``ifqa`` and ``ifqa.api``. Runs and predictions are checked against the
questions they are scored on, as the command line checks files."""

from __future__ import annotations

import tempfile
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from ifqa import arguments as arg
from ifqa.arguments import checked
from ifqa.artifacts import Example, QuestionSet, check_questions, check_records_ask, read_run
from ifqa.errors import IfqaError
from ifqa.eval.answers import best_over_answers, token_f1
from ifqa.eval.answers import exact_match as answers_exact_match
from ifqa.io import read_jsonl


def _predictions(name: str, value: Any):
    """A predictions file, a ``{qid: answer}`` mapping, or prediction records."""
    if isinstance(value, Mapping):
        return value
    return arg.records(name, value)


@checked(run=arg.records, questions=arg.optional(arg.questions), compare=arg.optional(arg.records))
def evaluate_run(
    run: str | Path | Iterable[Mapping[str, Any]],
    questions: QuestionSet | Sequence[Example] | None = None,
    compare: str | Path | Iterable[Mapping[str, Any]] | None = None,
) -> dict:
    """Recall@K (gold passage and answer string) of a run file or of run records, as ``ifqa evaluate
    --run``: the run's own flags, or flags recomputed from ``questions``; with ``compare`` (a baseline
    run), gold recall@1/5/20 with 95% intervals and the paired permutation test under ``"compare"``.

    >>> from ifqa import Pipeline, load_questions
    >>> report = evaluate_run(Pipeline(k=20).run(load_questions()), load_questions())
    >>> report["n"], sorted(report["recall"])
    (24, ['answer', 'gold'])
    """
    # loaded on first use: the API re-exports scoring without loading every metric
    from ifqa.eval.summary import compare_runs, summarize_run

    records = _run_records("run", run, questions)
    report = summarize_run(records, questions.examples if questions is not None else None)
    if compare is not None:
        baseline = _run_records("compare", compare, questions)
        missing = {_qid(r) for r in records} - {_qid(r) for r in baseline}
        if len(missing) == len(records):
            raise IfqaError(f"{_where(compare)}the two runs share no question; compare runs over the same questions")
        if missing:  # a paired test over the questions both hold would silently drop the rest
            raise IfqaError(
                f"{_where(compare)}compare holds {len(records) - len(missing)} of the run's {len(records)} "
                f"questions (missing qid {sorted(missing)[0]!r}); compare runs over the same questions"
            )
        if questions is not None:
            summarize_run(baseline, questions.examples)  # the baseline's flags recomputed from the same questions
        report["compare"] = {
            "baseline": str(compare) if isinstance(compare, (str, Path)) else "records",
            **compare_runs(records, baseline),
        }
    return report


def _qid(record: Mapping[str, Any]) -> str:
    return str(record.get("qid"))


def _where(given: Any) -> str:
    return f"{given}: " if isinstance(given, (str, Path)) else ""


def _run_records(name: str, run: str | Path | list, questions: QuestionSet | None) -> list:
    """The run's records, refused when empty or (with ``questions``) made for other questions: a
    file by its manifest, as the command line checks it, and any run by its qids."""
    records = read_run(run) if isinstance(run, (str, Path)) else list(run)
    if isinstance(run, (str, Path)) and questions is not None:
        check_questions(run, questions, records)
    if not records:
        raise IfqaError(f"{_where(run)}{name} holds no records; nothing to score")
    if questions is not None:
        known = {example.qid: example.question for example in questions.examples}
        unknown = [_qid(record) for record in records if _qid(record) not in known]
        if unknown:
            raise IfqaError(
                f"{_where(run)}{name}: {len(unknown)} of its {len(records)} records are for questions not in "
                f"{questions.name} (first qid {unknown[0]!r}); name the questions it was made for"
            )
        check_records_ask(records, questions)
    return records


def _judgments(name: str, value: Any):
    """A judgments file (``ifqa judge``'s output) or a ``{qid: verdict}`` mapping of booleans."""
    if isinstance(value, Mapping):
        if not all(isinstance(v, bool) for v in value.values()):
            raise TypeError(f"{name} maps question ids to True/False verdicts")
        return value
    return arg.path_like(name, value)


@checked(
    predictions=_predictions,
    questions=arg.questions,
    compare=arg.optional(_predictions),
    judgments=arg.optional(_judgments),
)
def evaluate_predictions(
    predictions: str | Path | Mapping[str, str] | Iterable[Mapping[str, Any]],
    questions: QuestionSet | Sequence[Example],
    compare: str | Path | Mapping[str, str] | Iterable[Mapping[str, Any]] | None = None,
    judgments: str | Path | Mapping[str, bool] | None = None,
) -> dict:
    """The ``ifqa evaluate --predictions`` report, its metric chosen by the questions' dataset (IfQA:
    EM/F1 and answer containment with 95% intervals and breakdowns; WIQA: accuracy by question type
    and path length; CausalQA: ROUGE-L, EM/F1 by source). ``predictions`` (and ``compare``, for the
    paired test) is a file, a ``{qid: answer}`` mapping or prediction records; objects are read by the
    same rules as files. ``judgments`` (``ifqa judge``'s file, or ``{qid: verdict}``) adds the LLM
    judge's accuracy and its agreement with EM.

    >>> from ifqa import load_questions
    >>> dev = load_questions()
    >>> evaluate_predictions({e.qid: e.answers[0] for e in dev}, dev)["em"]
    100.0
    """
    from ifqa.eval.tasks import task_for  # loaded on first use: the API re-exports scoring without loading every metric

    for given in (predictions, compare, judgments):  # a file made for another question set, as the CLI refuses it
        if isinstance(given, (str, Path)):
            check_questions(given, questions)
    task = task_for(questions)
    answers = _task_predictions(task, predictions)
    other = _task_predictions(task, compare) if compare is not None else None
    qids = {example.qid for example in questions.examples}
    for name, given, found in (("predictions", predictions, answers), ("compare", compare, other)):
        if found is not None and not qids & set(found):  # another set's predictions score 0, silently
            first = f" (first qid {next(iter(found))!r})" if found else ""
            raise IfqaError(
                f"{_where(given)}{name} answer none of the {len(qids)} questions of {questions.name}"
                f"{first}; name the questions they were made for"
            )
    answered = qids & set(answers)
    missing = sorted(answered - set(other)) if other is not None else []
    if missing:  # the paired test needs both answers
        raise IfqaError(
            f"{_where(compare)}compare answers {len(answered) - len(missing)} of the {len(answered)} questions "
            f"the predictions answer (missing qid {missing[0]!r}); compare predictions for the same questions"
        )
    report = task.summarize(questions.examples, answers, other)
    if isinstance(predictions, (str, Path)):  # an iterative reader's file: its steps scored too
        # loaded on first use: the API re-exports scoring without loading every metric
        from ifqa.eval.steps import summarize_steps

        steps = summarize_steps([record for _, record in read_jsonl(predictions) if isinstance(record, dict)])
        if steps is not None:
            report["iterative"] = steps
    if judgments is not None:
        # loaded on first use: the API re-exports scoring without loading every metric
        from ifqa.eval.judged import read_judgments, summarize_judgments

        if isinstance(judgments, Mapping):
            verdicts, judge = dict(judgments), {"model": "given", "prompt_sha256": ""}
        else:
            given = predictions if isinstance(predictions, (str, Path)) else None
            verdicts, judge = read_judgments(judgments, given)
        report.update(summarize_judgments(questions.examples, answers, verdicts, judge))
    return report


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
    if not records:
        raise IfqaError("predictions hold no answers; nothing to score")
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "predictions.jsonl"
        path.write_text("".join(json.dumps(record, ensure_ascii=False) + "\n" for record in records), encoding="utf-8")
        try:
            return task.read(path)
        except IfqaError as exc:  # name the record, not the temporary file
            raise IfqaError(str(exc).replace(f"{path}:", "predictions, record ", 1)) from None


@checked(prediction=arg.prediction, answers=arg.answers)
def exact_match(prediction: str, answers: Sequence[str]) -> float:
    """1.0 when the normalized prediction equals a normalized answer (SQuAD's rule), else 0.0.

    >>> exact_match("The Hudson river", ["Hudson River"])
    1.0
    """
    return best_over_answers(answers_exact_match, prediction, list(answers))


@checked(prediction=arg.prediction, answers=arg.answers)
def f1(prediction: str, answers: Sequence[str]) -> float:
    """The best token F1 over the answers (SQuAD's rule).

    >>> round(f1("Hudson", ["Hudson River"]), 3)
    0.667
    """
    return best_over_answers(token_f1, prediction, list(answers))
