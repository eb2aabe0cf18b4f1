"""Experiment results as ``results.json`` (what notebooks read), ``results.md`` and ``results.csv``."""

from __future__ import annotations

import csv
import io
from pathlib import Path
from typing import Any

from ifqa.io import atomic_write, write_json


def _ci(values: list | None) -> str:
    return f"[{values[0]:.1f}, {values[1]:.1f}]" if values else ""


def write_results(output: Path, results: dict) -> None:
    output.mkdir(parents=True, exist_ok=True)
    write_json(output / "results.json", results)
    lines = [f"# {results['name']}", "", f"{results['n']} questions ({results['questions']}).", ""]
    rows: list[dict[str, Any]] = []
    if results["retrievers"]:
        depths = list(results["retrievers"][0]["recall"]["answer"])
        lines += ["## Retrieval (recall %, gold passage / answer string)", "",
                  "| retriever | " + " | ".join(f"R@{k}" for k in depths) + " |", "|---" * (len(depths) + 1) + "|"]
        for r in results["retrievers"]:
            gold = r["recall"].get("gold", {})
            cells = [f"{gold.get(k, float('nan')):.1f} / {r['recall']['answer'][k]:.1f}" for k in depths]
            lines.append(f"| {r['name']} | " + " | ".join(cells) + " |")
            rows.append({"system": r["name"], "kind": "retriever",
                         **{f"gold@{k}": gold.get(k) for k in depths}, **{f"answer@{k}": r["recall"]["answer"][k] for k in depths}})
        lines.append("")
        tested = [r for r in results["retrievers"] if r.get("gold_ci95")]
        if tested:
            depths_ = list(tested[0]["gold_ci95"])
            lines += ["Gold recall with 95% bootstrap intervals; paired permutation test against the `compare_to` stage:", "",
                      "| retriever | " + " | ".join(f"R@{k} [95% CI] | Δ vs baseline (p)" for k in depths_) + " |",
                      "|---" * (2 * len(depths_) + 1) + "|"]
            for r in tested:
                cells = []
                for k in depths_:
                    cells.append(f"{r['recall']['gold'][k]:.1f} {_ci(r['gold_ci95'][k])}")
                    vs = (r.get("vs") or {}).get(k)
                    cells.append(f"{vs['difference']:+.1f} vs {r['vs']['name']} (p={vs['p_value']:.4f})" if vs else "")
                lines.append(f"| {r['name']} | " + " | ".join(cells) + " |")
            lines.append("")
    if results["readers"]:
        lines += ["## Readers (EM / F1 %, 95% bootstrap CI)", "",
                  "| system | retriever | EM | EM 95% CI | F1 | F1 95% CI | paper EM / F1 | status |", "|---|---|---|---|---|---|---|---|"]
        for r in results["readers"]:
            paper = r.get("paper") or {}
            paper_cell = f"{paper.get('em', '')} / {paper.get('f1', '')}" if paper else ""
            if r["status"] == "ran":
                lines.append(f"| {r['name']} | {r.get('retriever') or 'none'} | {r['em']:.2f} | {_ci(r['em_ci95'])} | "
                             f"{r['f1']:.2f} | {_ci(r['f1_ci95'])} | {paper_cell} | ran |")
            else:
                lines.append(f"| {r['name']} | {r.get('retriever') or 'none'} | – | | – | | {paper_cell} | "
                             f"{r['status']}: `{r['command']}` |")
            rows.append({"system": r["name"], "kind": "reader", "retriever": r.get("retriever"), "status": r["status"],
                         "em": r.get("em"), "em_low": (r.get("em_ci95") or [None])[0], "em_high": (r.get("em_ci95") or [None, None])[1],
                         "f1": r.get("f1"), "f1_low": (r.get("f1_ci95") or [None])[0], "f1_high": (r.get("f1_ci95") or [None, None])[1],
                         "paper_em": paper.get("em"), "paper_f1": paper.get("f1"), "command": r["command"]})
    with atomic_write(output / "results.md") as handle:
        handle.write("\n".join(lines) + "\n")
    columns: list[str] = []
    for row in rows:
        columns += [c for c in row if c not in columns]
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=columns)
    writer.writeheader()
    writer.writerows(rows)
    with atomic_write(output / "results.csv") as handle:
        handle.write(buffer.getvalue())
