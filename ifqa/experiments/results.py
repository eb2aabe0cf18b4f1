"""Experiment results as ``results.json`` (what notebooks read), ``results.md`` and ``results.csv``."""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any

from ifqa.eval.significance import interval
from ifqa.io import atomic_write, write_json
from ifqa.registry import TASKS


def _depths(tables) -> list:
    """The depths of several recall tables, in increasing order, each once (keys may be ints or strings)."""
    seen: dict = {}
    for table in tables:
        for k in table:
            seen.setdefault(str(k), k)
    return [seen[k] for k in sorted(seen, key=lambda k: (not k.isdigit(), int(k) if k.isdigit() else 0, k))]


def _pct(value) -> str:
    return f"{value:.1f}" if isinstance(value, (int, float)) else "–"


def write_results(output: Path, results: dict) -> None:
    """results.json, results.md (the retrieval and reader tables, the comparisons, breakdowns and premise
    classes) and results.csv (a row per retriever and reader)."""
    output.mkdir(parents=True, exist_ok=True)
    write_json(output / "results.json", results)
    lines = [f"# {results['name']}", "", f"{results['n']} questions ({results['questions']}).", ""]
    rows: list[dict[str, Any]] = []
    if results["retrievers"]:
        lines += _retrieval_table(results, rows) + _retrieval_intervals(results)
    if results["readers"]:
        headline = TASKS.get(results.get("task", "qa")).headline
        if any(r.get("judge_accuracy") is not None for r in results["readers"]):
            headline = (*headline, ("judge_accuracy", "Judge"))
        lines += _reader_table(results, headline, rows)
        lines += _comparison_table(results, headline)
        lines += _breakdown_table(results, TASKS.get(results.get("task", "qa")))
    lines += _premise_table(results)
    with atomic_write(output / "results.md") as handle:
        handle.write("\n".join(lines) + "\n")
    with atomic_write(output / "results.csv") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(dict.fromkeys(c for row in rows for c in row)))
        writer.writeheader()
        writer.writerows(rows)


def _retrieval_table(results: dict, rows: list) -> list[str]:
    """Recall at every depth any retriever was scored at (retrievers may differ in k; a cell it lacks is
    "–"), gold passage / answer string; each retriever's row added to ``rows``."""
    depths = _depths(r["recall"]["answer"] for r in results["retrievers"])
    lines = [
        "## Retrieval (recall %, gold passage / answer string)",
        "",
        "| retriever | " + " | ".join(f"R@{k}" for k in depths) + " |",
        "|---" * (len(depths) + 1) + "|",
    ]
    for r in results["retrievers"]:
        gold, answer = r["recall"].get("gold", {}), r["recall"]["answer"]
        cells = [f"{_pct(gold.get(k))} / {_pct(answer.get(k))}" if k in answer else "–" for k in depths]
        lines.append(f"| {r['name']} | " + " | ".join(cells) + " |")
        rows.append(
            {
                "system": r["name"],
                "kind": "retriever",
                **{f"gold@{k}": gold.get(k) for k in depths},
                **{f"answer@{k}": answer.get(k) for k in depths},
            }
        )
    return [*lines, ""]


def _retrieval_intervals(results: dict) -> list[str]:
    """Gold recall with its intervals, and the paired test against a ``compare_to`` stage where one has it."""
    tested = [r for r in results["retrievers"] if r.get("gold_ci95")]
    if not tested:
        return []
    depths = _depths(r["gold_ci95"] for r in tested)
    compared = any(r.get("vs") for r in tested)  # Δ columns only where some stage has a baseline
    heading = "; paired permutation test against the `compare_to` stage" if compared else ""
    column = " | Δ vs baseline (p)" if compared else ""
    lines = [
        f"Gold recall with 95% bootstrap intervals{heading}:",
        "",
        "| retriever | " + " | ".join(f"R@{k} [95% CI]{column}" for k in depths) + " |",
        "|---" * ((2 if compared else 1) * len(depths) + 1) + "|",
    ]
    for r in tested:
        cells = []
        for k in depths:
            ci = r["gold_ci95"].get(k)
            cells.append(f"{r['recall']['gold'][k]:.1f} {interval(ci)}" if ci is not None else "–")
            if compared:
                vs = (r.get("vs") or {}).get(k)
                cells.append(f"{vs['difference']:+.1f} vs {r['vs']['name']} (p={vs['p_value']:.4f})" if vs else "")
        lines.append(f"| {r['name']} | " + " | ".join(cells) + " |")
    return [*lines, ""]


def _reader_table(results: dict, headline, rows: list) -> list[str]:
    """Each reader's headline metrics with intervals, the paper's figures and its status (the command that
    would run a row that did not); each reader's row added to ``rows``."""
    labels = " / ".join(label for _, label in headline)
    lines = [
        f"## Readers ({labels} %, 95% bootstrap CI)",
        "",
        "| system | retriever | "
        + " | ".join(f"{label} | {label} 95% CI" for _, label in headline)
        + f" | paper {labels} | status |",
        "|---" * (2 * len(headline) + 4) + "|",
    ]
    for r in results["readers"]:
        paper = r.get("paper") or {}
        paper_cell = " / ".join(str(paper.get(metric, "")) for metric, _ in headline) if paper else ""
        ran = r["status"] == "ran"
        cells = " | ".join(
            f"{r[metric]:.2f} | {interval(r[metric + '_ci95'])}" if ran and r.get(metric) is not None else "– | "
            for metric, _ in headline
        )
        status = "ran" if ran else f"{r['status']}: `{r['command']}`"
        lines.append(f"| {r['name']} | {r.get('retriever') or 'none'} | {cells} | {paper_cell} | {status} |")
        row = {"system": r["name"], "kind": "reader", "retriever": r.get("retriever"), "status": r["status"]}
        for metric, _ in headline:
            low, high = r.get(f"{metric}_ci95") or (None, None)
            row.update({metric: r.get(metric), f"{metric}_low": low, f"{metric}_high": high})
            row[f"paper_{metric}"] = paper.get(metric)
        if r.get("judge"):
            row["judge_kappa_em"] = r["judge"]["kappa_em"]
        rows.append({**row, "command": r["command"]})
    return lines


def _comparison_table(results: dict, headline) -> list[str]:
    """Each reader against the one its ``compare_to`` names: paired differences with their intervals
    and permutation p-values, on the same questions."""
    compared = [r for r in results["readers"] if r.get("vs")]
    if not compared:
        return []
    metrics = [(m, label) for m, label in headline if any(f"{m}_difference" in r["vs"] for r in compared)]
    lines = [
        "",
        "Paired against another reader (difference, 95% bootstrap CI, permutation p):",
        "",
        "| system | against | " + " | ".join(f"Δ {label}" for _, label in metrics) + " |",
        "|---" * (len(metrics) + 2) + "|",
    ]
    for r in compared:
        cells = []
        for metric, _ in metrics:
            d = r["vs"].get(f"{metric}_difference")
            cells.append(f"{d['difference']:+.2f} {interval(d['ci95'])} p={d['p_value']:.4f}" if d else "–")
        lines.append(f"| {r['name']} | {r['vs']['name']} | " + " | ".join(cells) + " |")
    return lines + [""]


def _premise_table(results: dict) -> list[str]:
    """The premise analyses: each reader's correct / memory / other shares and memorization ratio."""
    analysed = results.get("premise") or []
    if not analysed:
        return []
    lines = [
        "## Does the reader follow the premise? (`ifqa analyze premise`)",
        "",
        "Each prediction is correct, memory (the model's own closed-book answer to the question's factual "
        "twin) or other, % with 95% bootstrap CI; M_R, Longpre et al.'s memorization ratio, is memory / "
        "(memory + correct).",
        "",
        "| reader | n | correct | memory | other | M_R | no premise clause |",
        "|---|---|---|---|---|---|---|",
    ]
    for p in analysed:
        ratio = p.get("memorization_ratio")
        cells = " | ".join(f"{p[c]:.1f} {interval(p[c + '_ci95'])}" for c in ("correct", "memory", "other"))
        lines.append(
            f"| {p['predictions']} | {p['n']} | {cells} | {'–' if ratio is None else f'{ratio:.1f}'} | "
            f"{p.get('no_premise', 0)} |"
        )
    return lines + [""]


def _breakdown_table(results: dict, task) -> list[str]:
    """The task's breakdown (WIQA accuracy by question type, CausalQA ROUGE-L by source) per reader,
    with the paper's figure in brackets where the config gives one (``paper: {by_question_type: {...}}``)."""
    if not task.table:
        return []
    key, metric = task.table
    ran = [r for r in results["readers"] if r["status"] == "ran" and r.get(key)]
    if not ran:
        return []
    groups = list(dict.fromkeys(g for r in ran for g in r[key]))
    label = dict(task.headline).get(metric, metric)
    lines = [
        "",
        f"{label} by {key.removeprefix('by_').replace('_', ' ')} (paper in brackets where given):",
        "",
        "| system | " + " | ".join(groups) + " | all |",
        "|---" * (len(groups) + 2) + "|",
    ]
    for r in ran:
        paper = (r.get("paper") or {}).get(key, {})
        cells = [
            f"{r[key][g][metric]:.2f}" + (f" ({paper[g]})" if g in paper else "") if g in r[key] else "–"
            for g in groups
        ]
        total = f"{r[metric]:.2f}" + (
            f" ({r['paper'][metric]})" if (r.get("paper") or {}).get(metric) is not None else ""
        )
        lines.append(f"| {r['name']} | " + " | ".join(cells) + f" | {total} |")
    return lines + [""]
