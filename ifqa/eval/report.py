"""The scorer's reports as plain-text tables (what `ifqa evaluate` and `ifqa retrieve` print)."""

from __future__ import annotations

from typing import Any

from ifqa.tables import table


def format_prediction_report(report: dict[str, Any]) -> str:
    low, high = report["em_ci95"]
    f_low, f_high = report["f1_ci95"]
    parts = [
        table(
            ["metric", "value", "95% CI"],
            [
                ["EM", report["em"], f"[{low:.2f}, {high:.2f}]"],
                ["F1", report["f1"], f"[{f_low:.2f}, {f_high:.2f}]"],
                ["EM (lenient normalization)", report["em_lenient"], ""],
            ],
        ),
        f"questions: {report['n']}  answered: {report['answered']}  predictions for unknown qids: {report['unknown_qids']}",
    ]
    for key, label in (("by_answer_type", "answer type"), ("by_question_word", "question word")):
        rows = [[name, group["n"], group["em"], group["f1"]] for name, group in report[key].items()]
        parts.append(table([label, "n", "EM", "F1"], rows))
    if "compare" in report:
        compare = report["compare"]
        rows = [
            [
                metric.upper(),
                report[metric],
                compare[metric],
                compare[f"{metric}_difference"]["difference"],
                "[{:.2f}, {:.2f}]".format(*compare[f"{metric}_difference"]["ci95"]),
                compare[f"{metric}_difference"]["p_value"],
            ]
            for metric in ("em", "f1")
        ]
        parts.append(table(["metric", "A", "B", "A-B", "95% CI", "p (paired permutation)"], rows))
    return "\n\n".join(parts)


def format_run_comparison(comparison: dict[str, Any], gold: dict[str, float]) -> str:
    rows = []
    for k, test in comparison["vs_baseline"].items():
        low, high = comparison["gold_ci95"][k]
        rows.append(
            [
                f"@{k}",
                gold.get(k, ""),
                f"[{low:.1f}, {high:.1f}]",
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
