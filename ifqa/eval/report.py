"""The scorer's reports as plain-text tables (what `ifqa evaluate` and `ifqa retrieve` print)."""

from __future__ import annotations

from typing import Any

from ifqa.eval.significance import interval
from ifqa.tables import table

LABELS = (("em", "EM"), ("f1", "F1"), ("containment", "Containment"), ("judge_accuracy", "Judge accuracy"))


def format_judge(judge: dict[str, Any]) -> str:
    """The judge's agreement with EM: Cohen's kappa, and the questions where they disagree."""
    disagree = judge["disagreements"]
    shown = ", ".join(disagree["judge_yes_em_no"][:10] + disagree["judge_no_em_yes"][:10])
    unclear = judge.get("unclear") or []
    return (
        f"judge {judge['model']} (prompt {judge['prompt_sha256'][:12]}): kappa with EM {judge['kappa_em']}; "
        f"says yes where EM says no: {len(disagree['judge_yes_em_no'])}, no where EM says yes: "
        f"{len(disagree['judge_no_em_yes'])}"
        + (f" (qids {shown})" if shown else "")
        + (f"; no verdict (unclear, counted as no): {len(unclear)} (qids {', '.join(unclear[:10])})" if unclear else "")
    )


def format_prediction_report(report: dict[str, Any]) -> str:
    metrics = [(key, label) for key, label in LABELS if key in report]
    rows = [[label, report[key], interval(report[f"{key}_ci95"], 2)] for key, label in metrics]
    rows.insert(2, ["EM (lenient normalization)", report["em_lenient"], ""])
    parts = [
        table(["metric", "value", "95% CI"], rows),
        f"questions: {report['n']}  answered: {report['answered']}  abstained: {report.get('abstained', 0)}  "
        f"predictions for unknown qids: {report['unknown_qids']}",
    ]
    if "judge" in report:
        parts.append(format_judge(report["judge"]))
    if "iterative" in report:
        parts.append(format_steps(report["iterative"]))
    grouped = [(key, label) for key, label in LABELS[:3] if key in report]
    for key, label in (("by_answer_type", "answer type"), ("by_question_word", "question word")):
        rows = [
            [name, group["n"], *[group[k] for k, _ in grouped if k in group]] for name, group in report[key].items()
        ]
        parts.append(table([label, "n", *[short for k, short in grouped]], rows))
    if "compare" in report:
        c, rows = report["compare"], []
        for metric, label in [(m, label) for m, label in grouped if m in c]:
            d = c[f"{metric}_difference"]
            rows.append([label, report[metric], c[metric], d["difference"], interval(d["ci95"], 2), d["p_value"]])
        parts.append(table(["metric", "A", "B", "A-B", "95% CI", "p (paired permutation)"], rows))
    return "\n\n".join(parts)


def format_steps(report: dict[str, Any]) -> str:
    """Iterative reading's steps (``eval.steps.summarize_steps``) in one paragraph."""
    stopped = ", ".join(f"{reason} {count}" for reason, count in sorted(report["stopped"].items()))
    return (
        f"iterative reading ({report['n']} questions): gold-passage recall over all steps "
        f"{report['gold_recall_all_steps']} {interval(report['gold_recall_all_steps_ci95'], 2)}, first search "
        f"{report['gold_recall_first_search']}; steps per question {report['steps_per_question']}, searches "
        f"{report['searches_per_question']}; stopped: {stopped}"
    )


def format_run_comparison(comparison: dict[str, Any], gold: dict[str, float]) -> str:
    rows = []
    for k, test in comparison["vs_baseline"].items():
        rows.append(
            [
                f"@{k}",
                gold.get(k, ""),
                interval(comparison["gold_ci95"][k]),
                f"{test['difference']:+.2f}",
                f"{test['p_value']:.4f}",
            ]
        )
    return (
        f"gold recall against {comparison['baseline']} ({comparison['n']} paired questions; "
        "permutation test):\n" + table(["depth", "recall", "95% CI", "difference", "p"], rows)
    )


def format_run_report(report: dict[str, Any]) -> str:
    depths = list(report["recall"]["answer"])
    rows = [
        [flavour, *[report["recall"][flavour][k] for k in depths]]
        for flavour in ("gold", "answer")
        if flavour in report["recall"]
    ]
    parts = [
        table(["recall (%)", *[f"@{k}" for k in depths]], rows),
        f"questions: {report['n']}  depth: {report['depth']}",
    ]
    by_word = report.get("answer_recall_by_question_word") or {}
    if by_word:
        key = next(iter(next(iter(by_word.values())).keys() - {"n"}))
        parts.append(table(["question word", "n", f"answer {key}"], [[w, g["n"], g[key]] for w, g in by_word.items()]))
    return "\n\n".join(parts)


def accuracy_lines(report: dict[str, Any], what: str, answered: str, groups: dict[str, str]) -> list[str]:
    """A choice task's report (WIQA, multiple choice): its accuracy with the interval, a table for each
    grouping (column heading -> report key), and the paired comparison when one was asked for."""
    lines = [
        f"{what} accuracy {report['accuracy']:.2f} {interval(report['accuracy_ci95'])} over {report['n']} "
        f"questions ({report['answered']} {answered})"
    ]
    for heading, key in groups.items():
        rows = [[name, g["n"], f"{g['accuracy']:.2f}", interval(g["ci95"])] for name, g in report[key].items()]
        lines += ["", table([heading, "n", "accuracy", "95% CI"], rows)]
    if "compare" in report:
        compare, d = report["compare"], report["compare"]["accuracy_difference"]
        lines += [
            "",
            f"vs the compared predictions ({compare['accuracy']:.2f}): {d['difference']:+.2f} {interval(d['ci95'])}, "
            f"paired permutation p={d['p_value']:.4f}",
        ]
    return lines
