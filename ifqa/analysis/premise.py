"""Does a reader follow the premise, or answer from memory?

A counterfactual answer holds only under its premise; a model that ignores the premise gives the
factual answer it remembers. The same model answers each question's factual twin (``twins``)
closed-book, with no demonstrations: that answer is its memory. Each counterfactual prediction is then

- ``correct``: it gives a gold answer (exact match, or the gold answer contained in it);
- ``memory``: it is wrong and gives the model's own factual answer (the twin's prediction);
- ``other``: wrong in some other way.

Reported with 95% intervals, over all questions and over those whose twin answer differs from the
gold one (where memory and a correct answer can be told apart), by IfQA's answer types and question
words, and by whether a gold answer appears in the passages the reader read (``in passages``), it
read passages without one (``derived``), or it read none (closed-book: ``no passages``). The per-question
classes are written beside the report, so its numbers recompute from the files.
"""

from __future__ import annotations

import collections
import logging
from dataclasses import fields
from pathlib import Path
from typing import Any

from ifqa.analysis.llm_twins import twins_by_llm
from ifqa.analysis.twins import twin_set, twins_by_rule, twins_from_file
from ifqa.artifacts import QuestionSet, read_manifest, read_predictions, read_run
from ifqa.configs import from_options
from ifqa.datasets import QuestionSource, premise_in_context
from ifqa.errors import IfqaError
from ifqa.eval.answers import best_over_answers, contains_answer, exact_match
from ifqa.eval.categories import ANSWER_TYPES, QUESTION_WORDS, answer_type, question_word
from ifqa.eval.multiple_choice import chosen, gold, options
from ifqa.eval.passages import has_answer, percent
from ifqa.eval.significance import bootstrap_ci
from ifqa.io import read_jsonl, write_json, write_jsonl
from ifqa.llm.config import ModelAccess
from ifqa.readers import ReadJob
from ifqa.readers.llm.config import LLMReaderConfig
from ifqa.registry import READERS
from ifqa.tables import table

log = logging.getLogger(__name__)

CLASSES = ("correct", "memory", "other")
EVIDENCE = ("in passages", "derived", "no passages")


def twin_reader_config(manifest: dict):
    """The closed-book LLM reader of the predictions' own model (from their manifest), no demonstrations."""
    if manifest.get("reader") not in ("llm", "iterative"):
        raise IfqaError(
            f"the premise analysis asks the predictions' model their twins; {manifest.get('reader')!r} predictions "
            "have none it can ask: give --twin-predictions FILE (the same reader on the twins)"
        )
    shared = {f.name for f in fields(ModelAccess)} | {"seed", "prompts_dir"}
    given = {k: v for k, v in (manifest.get("config") or {}).items() if k in shared}
    return from_options(LLMReaderConfig, {**given, "mode": "qa", "demos": 0})


def make_twins(
    how: str | Path, questions: QuestionSet, predictions: str | Path, api_key: str | None = None, progress: bool = True
) -> tuple[QuestionSet, list[dict] | None]:
    """The twins by ``how``: ``rule``, ``llm`` (written by the predictions' own model, each kept with
    the prompt's SHA-256 and the model's reply) or a ``{qid, question}`` file; with the records to keep.
    A set whose premise is in its context (FaithEval) has no premise to take out of a question: each
    question is its own twin, asked without the context."""
    if str(how) in ("rule", "llm") and premise_in_context(questions):
        log.info(
            "%s states its premise in the context: each question is its own twin, asked closed-book", questions.name
        )
        return twin_set(questions, {e.qid: e.question for e in questions.examples}, "context"), None
    if str(how) == "rule":
        return twins_by_rule(questions), None
    if str(how) == "llm":
        return twins_by_llm(questions, twin_reader_config(read_manifest(predictions) or {}), api_key, progress)
    return twins_from_file(questions, how), None


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


def premise_report(rows: list[dict]) -> dict[str, Any]:
    """The report of per-question rows ``{"class", "premise_changes_answer", "evidence", ...}``."""

    def shares(group: list[dict]) -> dict[str, Any]:
        out: dict[str, Any] = {"n": len(group)}
        for name in CLASSES:
            values = [float(r["class"] == name) for r in group]
            out[name] = round(percent(values), 2)
            out[f"{name}_ci95"] = list(bootstrap_ci(values))
        return out

    def by(key: str, order) -> dict[str, Any]:
        groups = collections.defaultdict(list)
        for row in rows:
            groups[row[key]].append(row)
        return {name: shares(groups[name]) for name in order if groups.get(name)}

    changed = [r for r in rows if r["premise_changes_answer"]]
    return {
        "all": shares(rows),
        "premise_changes_answer": shares(changed),
        "by_evidence": by("evidence", EVIDENCE),
        "by_answer_type": by("answer_type", ANSWER_TYPES),
        "by_question_word": by("question_word", QUESTION_WORDS),
    }


def analyze(
    predictions_path: str | Path,
    questions: QuestionSet,
    twins: QuestionSet,
    output: str | Path,
    twin_predictions: str | Path | None = None,
    api_key: str | None = None,
    progress: bool = True,
    twin_records: list[dict] | None = None,
) -> dict[str, Any]:
    """Answer the twins (unless ``twin_predictions`` are given), classify, write the folder ``output``:
    ``twins.jsonl``, ``twin-predictions.jsonl`` (+ manifest), ``premise.jsonl`` (per question) and
    ``premise.json`` (the report)."""
    output = Path(output)
    manifest = read_manifest(predictions_path) or {}
    predictions = read_predictions(predictions_path)
    records = {str(r["qid"]): r for _, r in read_jsonl(predictions_path) if isinstance(r, dict) and "qid" in r}
    contexts: dict[str, list[dict]] = {}
    if (manifest.get("config") or {}).get("mode") == "open" and manifest.get("run"):
        if not Path(manifest["run"]).is_file():
            raise IfqaError("the run these open-book predictions read is gone; the evidence needs it", manifest["run"])
        contexts = {r["qid"]: r["ctxs"] for r in read_run(manifest["run"])}
    if twin_predictions is None:
        config = twin_reader_config(manifest)  # before anything is written
    output.mkdir(parents=True, exist_ok=True)
    write_jsonl(
        output / "twins.jsonl", twin_records or [{"qid": e.qid, "question": e.question} for e in twins.examples]
    )
    if twin_predictions is None:
        twin_predictions = output / "twin-predictions.jsonl"
        job = ReadJob(
            twins, QuestionSource(file=str(output / "twins.jsonl")), twin_predictions, None, progress, api_key
        )
        READERS.get("llm").read(config, job)
    twin_answers = read_predictions(twin_predictions)
    twin_questions = {t.qid: t.question for t in twins.examples}
    rows = []
    for example in questions.examples:
        prediction, twin = predictions.get(example.qid, ""), twin_answers.get(example.qid, "")
        if questions.task == "mc":  # options compared by label: the chosen one's, or none
            prediction, twin = (chosen(p, options(example)) or "" for p in (prediction, twin))
            answers = [gold(example) or ""]
        else:
            answers = example.answers
        rows.append(
            {
                "qid": example.qid,
                "class": classify(prediction, twin, answers),
                "prediction": prediction,
                "twin_question": twin_questions[example.qid],
                "twin_prediction": twin,
                "premise_changes_answer": not classify(twin, "", answers) == "correct",
                "evidence": evidence(records.get(example.qid, {}), example, manifest, contexts),
                "answer_type": answer_type(example.answers[0]),
                "question_word": question_word(example.question),
            }
        )
    report = {
        "predictions": str(predictions_path),
        "reader": manifest.get("reader"),
        "mode": (manifest.get("config") or {}).get("mode"),
        "twin_predictions": str(twin_predictions),
        **premise_report(rows),
    }
    write_jsonl(output / "premise.jsonl", rows)
    write_json(output / "premise.json", report)
    return report


def format_report(report: dict[str, Any]) -> str:
    def row(name: str, group: dict) -> list:
        return [
            name,
            group["n"],
            *[f"{group[c]:.1f} [{group[c + '_ci95'][0]:.1f}, {group[c + '_ci95'][1]:.1f}]" for c in CLASSES],
        ]

    header = ["questions", "n", *[f"{c} % [95% CI]" for c in CLASSES]]
    lines = [row("all", report["all"]), row("premise changes the answer", report["premise_changes_answer"])]
    lines += [row(f"evidence: {k}", g) for k, g in report["by_evidence"].items()]
    lines += [row(f"answer type: {k}", g) for k, g in report["by_answer_type"].items()]
    return f"reader {report['reader']} ({report['mode'] or 'steps'}): does it follow the premise?\n\n" + table(
        header, lines
    )
