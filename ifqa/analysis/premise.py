"""Does a reader follow the premise, or answer from memory? Each counterfactual prediction is
``correct`` (it gives a gold answer), ``memory`` (wrong, and the model's own answer to the factual
twin, asked closed-book) or ``other``, reported with intervals and breakdowns (docs/evaluation.md);
the per-question classes are written beside the report, so its numbers recompute from the files."""

from __future__ import annotations

import collections
import functools
import logging
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any

from ifqa.analysis.llm_twins import twins_by_llm
from ifqa.analysis.twins import rule_twin, twin_set, twins_from_file
from ifqa.artifacts import QuestionSet, check_questions, read_manifest, read_predictions, read_run
from ifqa.configs import from_options
from ifqa.datasets import QuestionSource, premise_in_context
from ifqa.errors import IfqaError
from ifqa.eval.answers import best_over_answers, contains_answer, exact_match, normalize_answer
from ifqa.eval.categories import ANSWER_TYPES, QUESTION_WORDS, answer_type, question_word
from ifqa.eval.multiple_choice import chosen, gold, options
from ifqa.eval.passages import has_answer, percent
from ifqa.eval.significance import bootstrap_ci, interval
from ifqa.io import files_into, read_jsonl, write_json, write_jsonl
from ifqa.llm.config import ModelAccess
from ifqa.readers import ReadJob
from ifqa.readers.llm.config import LLMReaderConfig, SharedDeviceReaderConfig
from ifqa.registry import READERS
from ifqa.tables import table

log = logging.getLogger(__name__)

CLASSES = ("correct", "memory", "other")
EVIDENCE = ("in passages", "derived", "no passages")


@dataclass
class Reading:
    """The predictions under analysis, read once: their file, manifest, answers and records, and the
    passages an open-book reading read (from the run its manifest names)."""

    manifest: dict
    predictions: dict[str, str]
    records: dict[str, dict]
    contexts: dict[str, list[dict]]

    @classmethod
    def load(cls, path: str | Path, questions: QuestionSet) -> Reading:
        check_questions(path, questions)
        manifest = read_manifest(path) or {}
        records = {str(r["qid"]): r for _, r in read_jsonl(path) if isinstance(r, dict) and "qid" in r}
        contexts: dict[str, list[dict]] = {}
        if (manifest.get("config") or {}).get("mode") == "open" and manifest.get("run"):
            if not Path(manifest["run"]).is_file():
                raise IfqaError(
                    "the run these open-book predictions read is gone; the evidence needs it", manifest["run"]
                )
            contexts = {r["qid"]: r["ctxs"] for r in read_run(manifest["run"])}
        return cls(manifest, read_predictions(path), records, contexts)

    @functools.cached_property
    def twin_config(self) -> LLMReaderConfig:
        """The predictions' own model (their manifest's settings) asking the twins closed-book, with no
        demonstrations and as factual questions: no counterfactual instruction (``factual_qa``), which
        would make its memory answer a counterfactual one. ifqa's own template, whatever templates the
        predictions were read with."""
        if self.manifest.get("reader") not in ("llm", "iterative"):
            raise IfqaError(
                f"the premise analysis asks the predictions' model their twins; {self.manifest.get('reader')!r} "
                "predictions have none it can ask: give --twin-predictions FILE (the same reader on the twins)"
            )
        shared = {f.name for f in fields(ModelAccess)} | {"seed"}
        given = {k: v for k, v in (self.manifest.get("config") or {}).items() if k in shared}
        closed_book = from_options(SharedDeviceReaderConfig, {**given, "mode": "qa", "demos": 0})
        return replace(closed_book, follow_card=False)  # a trained reader's memory: its closed-book answer


def make_twins(
    how: str | Path, questions: QuestionSet, reading: Reading, api_key: str | None = None, progress: bool = True
) -> tuple[QuestionSet, list[dict] | None, dict | None]:
    """The twins by ``how`` (with the records to keep, and the twin model's session record): ``rule``,
    ``llm`` (written by the predictions' own model) or a ``{qid, question}`` file. A set whose premise is
    in its context (FaithEval) has no premise to take out of a question: each question is its own twin,
    asked without the context."""
    if str(how) in ("rule", "llm") and premise_in_context(questions):
        log.info(
            "%s states its premise in the context: each question is its own twin, asked closed-book", questions.name
        )
        return twin_set(questions, {e.qid: e.question for e in questions.examples}, "context"), None, None
    if str(how) == "rule":
        return twin_set(questions, {e.qid: rule_twin(e.question) for e in questions.examples}, "rule"), None, None
    if str(how) == "llm":
        return twins_by_llm(questions, reading.twin_config, api_key, progress)
    return twins_from_file(questions, how), None, None


def twin_answers(
    twins: QuestionSet, reading: Reading, given: str | Path | None, folder: Path, api_key: str | None, progress: bool
) -> dict[str, str]:
    """The twins answered: ``given`` (the same reader's predictions on them, checked against the twins
    as every input is: made for these twin questions, one for every question), else the predictions'
    model answering them into ``folder``."""
    if given is not None:
        check_questions(given, twins)
        answered = read_predictions(given)
        missing = [e.qid for e in twins.examples if e.qid not in answered]
        if missing:
            raise IfqaError(
                f"no twin prediction for qid {missing[0]!r} ({len(missing)} of {len(twins)} missing): "
                "answer every twin (ifqa read ... --questions TWINS)",
                given,
            )
        return answered
    config = reading.twin_config
    if twins.task == "qa":  # a multiple-choice twin keeps its options' template, which asks for a letter only
        config = replace(config, template="factual_qa")
    output = folder / "twin-predictions.jsonl"
    job = ReadJob(twins, QuestionSource(file=str(folder / "twins.jsonl")), output, None, progress, api_key)
    READERS.get("llm").read(config, job)
    return read_predictions(output)


def evidence(record: dict, example, manifest: dict, contexts: dict[str, list[dict]]) -> str:
    """Where the reader's evidence stood: a gold answer in a passage it read, passages without one, none."""
    config = manifest.get("config") or {}
    texts: list[str] = []
    if isinstance(record.get("steps"), list):  # iterative: what every search showed
        flags = [p.get("has_answer") for s in record["steps"] for p in s.get("passages") or []]
        if not flags:
            return "no passages"
        return "in passages" if any(flags) else "derived"
    mode = config.get("mode")
    if mode == "open":
        texts = [c.get("text", "") for c in contexts.get(example.qid, [])[: int(config.get("passages", 5))]]
    elif mode == "context":
        texts = list(example.context)
    elif mode == "genread" and record.get("background"):
        texts = [record["background"]]
    if not texts:
        return "no passages"
    return "in passages" if any(has_answer(example.answers, t) for t in texts) else "derived"


def classify(prediction: str, twin: str, answers: list[str]) -> str:
    def gives(text: str, refs: list[str]) -> bool:
        return bool(text.strip()) and (
            best_over_answers(exact_match, text, refs) == 1.0 or best_over_answers(contains_answer, text, refs) == 1.0
        )

    if gives(prediction, answers):
        return "correct"
    if twin.strip() and gives(prediction, [twin]):
        return "memory"
    return "other"


def memorization_ratio(rows: list[dict]) -> float | None:
    """Longpre et al. (2021)'s memorization ratio, M_R = memory / (memory + correct), in percent: of the
    questions a reader answers either way, the share it answers from memory (None when it answers none)."""
    memory = sum(r["class"] == "memory" for r in rows)
    correct = sum(r["class"] == "correct" for r in rows)
    return round(100 * memory / (memory + correct), 2) if memory + correct else None


def premise_report(rows: list[dict]) -> dict[str, Any]:
    """The report of per-question rows ``{"class", "premise_changes_answer", "evidence", ...}``: the
    classes' shares with 95% intervals and the memorization ratio, over the questions that have a
    premise; those without one (their twin is the question itself) are counted apart."""
    with_premise = [r for r in rows if r["class"] != "no premise"]

    def shares(group: list[dict]) -> dict[str, Any]:
        out: dict[str, Any] = {"n": len(group)}
        for name in CLASSES:
            values = [float(r["class"] == name) for r in group]
            out[name] = round(percent(values), 2)
            out[f"{name}_ci95"] = list(bootstrap_ci(values))
        out["memorization_ratio"] = memorization_ratio(group)
        return out

    def by(key: str, order) -> dict[str, Any]:
        groups = collections.defaultdict(list)
        for row in with_premise:
            groups[row[key]].append(row)
        return {name: shares(groups[name]) for name in order if groups.get(name)}

    changed = [r for r in with_premise if r["premise_changes_answer"]]
    return {
        "all": shares(with_premise),
        "premise_changes_answer": shares(changed),
        "no_premise": {
            "n": len(rows) - len(with_premise),
            "qids": [r["qid"] for r in rows if r["class"] == "no premise"],
        },
        "by_evidence": by("evidence", EVIDENCE),
        "by_answer_type": by("answer_type", ANSWER_TYPES),
        "by_question_word": by("question_word", QUESTION_WORDS),
    }


def analyze(
    predictions: str | Path,
    questions: QuestionSet,
    output: str | Path,
    twins: str | Path = "rule",
    twin_predictions: str | Path | None = None,
    api_key: str | None = None,
    progress: bool = True,
) -> dict[str, Any]:
    """Make the twins (``make_twins``), answer them (unless ``twin_predictions`` are given), classify,
    and write the folder ``output`` whole or not at all: ``twins.jsonl``, ``twin-predictions.jsonl``
    (+ manifest), ``premise.jsonl`` (per question) and ``premise.json`` (the report)."""
    output = Path(output)
    reading = Reading.load(predictions, questions)
    twin_questions, twin_records, twin_model = make_twins(twins, questions, reading, api_key, progress)
    if twin_predictions is None:
        reading.twin_config  # noqa: B018 - refused before the twins are asked or anything is written
    with files_into(output) as folder:
        answered = twin_answers(twin_questions, reading, twin_predictions, folder, api_key, progress)
        by_qid = {t.qid: t.question for t in twin_questions.examples}
        context_premise = premise_in_context(questions)
        rows = [
            _row(example, reading, by_qid[example.qid], answered.get(example.qid, ""), questions, context_premise)
            for example in questions.examples
        ]
        report = {
            "predictions": str(predictions),
            "reader": reading.manifest.get("reader"),
            "mode": (reading.manifest.get("config") or {}).get("mode"),
            "twin_predictions": str(twin_predictions or output / "twin-predictions.jsonl"),
            **({"twin_model": twin_model} if twin_model else {}),
            **premise_report(rows),
        }
        write_jsonl(
            folder / "twins.jsonl", twin_records or [{"qid": e.qid, "question": e.question} for e in twin_questions]
        )
        write_jsonl(folder / "premise.jsonl", rows)
        write_json(folder / "premise.json", report)
    return report


def _row(
    example, reading: Reading, twin: str, twin_prediction: str, questions: QuestionSet, context_premise: bool
) -> dict:
    """One question's row: its class, and what the report breaks it down by. A question whose twin is
    itself (no premise clause to take out) cannot tell memory from an answer: it is "no premise"."""
    prediction = reading.predictions.get(example.qid, "")
    if questions.task == "mc":  # options compared by label: the chosen one's, or none
        prediction, twin_prediction = (chosen(p, options(example)) or "" for p in (prediction, twin_prediction))
        answers = [gold(example) or ""]
    else:
        answers = example.answers
    has_premise = context_premise or normalize_answer(twin) != normalize_answer(example.question)
    return {
        "qid": example.qid,
        "class": classify(prediction, twin_prediction, answers) if has_premise else "no premise",
        "prediction": prediction,
        "twin_question": twin,
        "twin_prediction": twin_prediction,
        "premise_changes_answer": not classify(twin_prediction, "", answers) == "correct",
        "evidence": evidence(reading.records.get(example.qid, {}), example, reading.manifest, reading.contexts),
        "answer_type": answer_type(example.answers[0]),
        "question_word": question_word(example.question),
    }


def format_report(report: dict[str, Any]) -> str:
    def row(name: str, group: dict) -> list:
        ratio = group.get("memorization_ratio")
        return [
            name,
            group["n"],
            *[f"{group[c]:.1f} {interval(group[c + '_ci95'])}" for c in CLASSES],
            "–" if ratio is None else f"{ratio:.1f}",
        ]

    header = ["questions", "n", *[f"{c} % [95% CI]" for c in CLASSES], "M_R %"]
    lines = [row("all", report["all"]), row("premise changes the answer", report["premise_changes_answer"])]
    lines += [row(f"evidence: {k}", g) for k, g in report["by_evidence"].items()]
    lines += [row(f"answer type: {k}", g) for k, g in report["by_answer_type"].items()]
    apart = report.get("no_premise", {}).get("n", 0)
    note = (
        f"\n\n{apart} questions have no premise clause (their twin is the question itself) and are left out "
        "above; their qids are in premise.json"
        if apart
        else ""
    )
    return (
        f"reader {report['reader']} ({report['mode'] or 'steps'}): does it follow the premise? "
        "(M_R: memorization ratio, memory / (memory + correct), Longpre et al. 2021)\n\n" + table(header, lines) + note
    )
