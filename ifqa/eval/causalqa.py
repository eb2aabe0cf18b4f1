"""CausalQA scoring as in Bondarenko et al. (2022), Table 4: ROUGE-L precision, recall and F1
(Lin, 2004; the `rouge-score` package, no stemming) beside SQuAD's EM and token F1, the best over a
question's answers, per source dataset and macro- and micro-averaged over sources.
"""

from __future__ import annotations

import collections
from collections.abc import Mapping, Sequence
from typing import Any

from ifqa.eval.answers import best_over_answers, exact_match, token_f1
from ifqa.eval.significance import bootstrap_ci, interval, paired_test
from ifqa.tables import table

METRICS = ("rouge_l_precision", "rouge_l_recall", "rouge_l_f1", "em", "f1")


def _rouge():
    from rouge_score import rouge_scorer

    return rouge_scorer.RougeScorer(["rougeL"], use_stemmer=False)


def question_scores(examples: Sequence[Any], predictions: Mapping[str, str]) -> list[dict[str, float]]:
    """Per question: ROUGE-L of the answer with the best F1 (its P and R with it), EM and F1."""
    scorer = _rouge()
    scores = []
    for example in examples:
        prediction = predictions.get(example.qid, "")
        best = max((scorer.score(answer, prediction)["rougeL"] for answer in example.answers), key=lambda s: s.fmeasure)
        scores.append(
            {
                "rouge_l_precision": best.precision,
                "rouge_l_recall": best.recall,
                "rouge_l_f1": best.fmeasure,
                "em": best_over_answers(exact_match, prediction, example.answers),
                "f1": best_over_answers(token_f1, prediction, example.answers),
            }
        )
    return scores


def _means(scores: Sequence[Mapping[str, float]]) -> dict[str, float]:
    return {m: round(100 * sum(s[m] for s in scores) / len(scores), 2) if scores else 0.0 for m in METRICS}


def summarize_causalqa(
    examples: Sequence[Any], predictions: Mapping[str, str], compare: Mapping[str, str] | None = None
) -> dict[str, Any]:
    """Micro averages with 95% bootstrap CIs, per-source scores, their macro average; paired test vs ``compare``."""
    scores = question_scores(examples, predictions)
    by_source: dict[str, list[dict[str, float]]] = collections.defaultdict(list)
    for example, score in zip(examples, scores):
        by_source[example.meta.get("source", "unknown")].append(score)
    sources = {name: {"n": len(group), **_means(group)} for name, group in sorted(by_source.items())}
    report: dict[str, Any] = {
        "task": "causalqa",
        "n": len(examples),
        "answered": sum(1 for e in examples if predictions.get(e.qid, "").strip()),
        **_means(scores),
        **{f"{m}_ci95": list(bootstrap_ci([s[m] for s in scores])) for m in ("rouge_l_f1", "em", "f1")},
        "by_source": sources,
        "macro": {m: round(sum(g[m] for g in sources.values()) / len(sources), 2) if sources else 0.0 for m in METRICS},
        "unknown_qids": len(set(predictions) - {e.qid for e in examples}),
    }
    if compare is not None:
        other = question_scores(examples, compare)
        report["compare"] = {
            **_means(other),
            **{
                f"{m}_difference": paired_test([s[m] for s in scores], [s[m] for s in other])
                for m in ("rouge_l_f1", "em", "f1")
            },
        }
    return report


def format_causalqa_report(report: dict[str, Any]) -> str:
    header = ["source", "n", "ROUGE-L P", "ROUGE-L R", "ROUGE-L F1", "EM", "F1"]
    rows = [[name, g["n"], *[f"{g[m]:.2f}" for m in METRICS]] for name, g in report["by_source"].items()]
    rows.append(["macro average", len(report["by_source"]), *[f"{report['macro'][m]:.2f}" for m in METRICS]])
    rows.append(["micro average", report["n"], *[f"{report[m]:.2f}" for m in METRICS]])
    parts = [
        f"CausalQA: ROUGE-L F1 {report['rouge_l_f1']:.2f} {interval(report['rouge_l_f1_ci95'], 2)}, EM {report['em']:.2f} "
        f"{interval(report['em_ci95'], 2)}, F1 {report['f1']:.2f} {interval(report['f1_ci95'], 2)} over {report['n']} questions "
        f"({report['answered']} answered)",
        table(header, rows),
    ]
    if "compare" in report:
        c, rows = report["compare"], []
        for m in ("rouge_l_f1", "em", "f1"):
            d = c[f"{m}_difference"]
            rows.append(
                [m, f"{report[m]:.2f}", f"{c[m]:.2f}", f"{d['difference']:+.2f}", interval(d["ci95"], 2), d["p_value"]]
            )
        parts.append(table(["metric", "A", "B", "A-B", "95% CI", "p (paired permutation)"], rows))
    if report["unknown_qids"]:
        parts.append(f"{report['unknown_qids']} predictions name questions not in the set (ignored)")
    return "\n\n".join(parts)
