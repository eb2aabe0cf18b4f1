"""`ifqa experiment run CONFIG.yaml`: retrieve -> read -> evaluate for a grid of systems.

A config names the questions, the retrievers (index lists, fused when several), the run depth and
the readers. Each stage's output carries a ``.stage.json`` with a key made of its parameters and
the checksums of its inputs; a stage whose key is unchanged is skipped, so rerunning after adding
one reader runs only that reader. Readers whose model is not configured (``${IFQA_LLM_MODEL}``
unset, say) are reported as skipped with the command that would run them and the paper's figure,
never with a made-up number. Results go to ``results.md``, ``results.csv`` and ``results.json``.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import logging
import os
import re
from pathlib import Path
from typing import Any

from ifqa.errors import IfqaError
from ifqa.io import atomic_write, write_json

log = logging.getLogger(__name__)

_VARIABLE = re.compile(r"\$\{(\w+)(?::-([^}]*))?\}")
READER_KEYS = {"name", "reader", "mode", "cot", "model", "backend", "base_url", "retriever", "passages", "demos",
               "selection", "seed", "samples", "temperature", "max_tokens", "max_prompt_tokens", "concurrency",
               "checkpoint", "beams", "paper", "completions"}


def _expand(value: Any) -> Any:
    """``${VAR}`` and ``${VAR:-default}`` from the environment, recursively."""
    if isinstance(value, str):
        return _VARIABLE.sub(lambda m: os.environ.get(m.group(1), m.group(2) or ""), value)
    if isinstance(value, list):
        return [_expand(v) for v in value]
    if isinstance(value, dict):
        return {k: _expand(v) for k, v in value.items()}
    return value


def load_config(path: str | Path) -> dict:
    import yaml

    path = Path(path)
    if not path.exists():
        raise IfqaError("no such file", path)
    try:
        config = yaml.safe_load(path.read_text())
    except yaml.YAMLError as exc:
        line = getattr(getattr(exc, "problem_mark", None), "line", None)
        raise IfqaError(f"invalid YAML ({getattr(exc, 'problem', exc)})", path, line + 1 if line is not None else None) from None
    if not isinstance(config, dict) or "name" not in config or "questions" not in config:
        raise IfqaError("an experiment needs at least 'name' and 'questions'", path)
    config = _expand(config)
    names = [r["name"] for r in config.get("retrievers", [])]
    for reader in config.get("readers", []):
        unknown = set(reader) - READER_KEYS
        if unknown:
            raise IfqaError(f"reader {reader.get('name')!r}: unknown key(s) {', '.join(sorted(unknown))}", path)
        if reader.get("retriever") and reader["retriever"] not in names:
            raise IfqaError(f"reader {reader['name']!r} uses retriever {reader['retriever']!r}, which is not defined", path)
    config["_root"] = str(path.parent.resolve())
    return config


def _resolve(config: dict, value: str | None) -> str | None:
    if not value or ":" in value.split("/")[0]:  # demo:bm25, prebuilt:NAME, hub ids with no slash stay
        return value
    candidate = Path(config["_root"]) / value
    return str(candidate) if candidate.exists() else value


def _index_manifest(spec: str) -> dict:
    """An index's manifest without loading the index (or a stand-in for pyserini's prebuilt ones)."""
    from ifqa.retrieval.index import read_manifest

    if spec.startswith("prebuilt:"):
        return {"corpus": {"sha256": spec}, "params": {}}
    if spec.startswith("demo:"):
        from ifqa import demo

        return read_manifest(demo.index_path(spec.split(":", 1)[1]))
    return read_manifest(spec)


def _stage_key(params: dict, inputs: list[Path]) -> str:
    from ifqa.retrieval.index import file_sha256

    payload = json.dumps({"params": params, "inputs": [file_sha256(p) for p in inputs]}, sort_keys=True, default=str)
    return hashlib.sha256(payload.encode()).hexdigest()


def _up_to_date(output: Path, key: str) -> bool:
    stage = Path(f"{output}.stage.json")
    return output.exists() and stage.exists() and json.loads(stage.read_text()).get("key") == key


def _mark(output: Path, key: str, params: dict) -> None:
    write_json(f"{output}.stage.json", {"key": key, "params": params})


def _questions(config: dict) -> tuple[list, str]:
    from ifqa import data

    spec = config["questions"]
    if "file" in spec:
        path = _resolve(config, spec["file"])
        return data.load_examples(path), str(path)
    return data.load_split(spec.get("setting", "demo"), spec.get("split", "dev")), f"{spec.get('setting', 'demo')}:{spec.get('split', 'dev')}"


def reader_command(config: dict, reader: dict, run: Path | None) -> str:
    """The `ifqa read` command equivalent to a reader entry (shown for rows that cannot run here)."""
    spec = config["questions"]
    where = f"--questions {spec['file']}" if "file" in spec else f"--setting {spec.get('setting', 'demo')} --split {spec.get('split', 'dev')}"
    if reader.get("reader", "llm") == "fid":
        return f"ifqa read --reader fid --checkpoint {reader.get('checkpoint') or 'FID_CHECKPOINT'} --run {os.path.relpath(run) if run else 'RUN'} {where}"
    parts = [f"ifqa read --reader llm --mode {reader.get('mode', 'qa')}", f"--model {reader.get('model') or 'MODEL'}"]
    if reader.get("base_url"):
        parts.append(f"--base-url {reader['base_url']}")
    if reader.get("cot"):
        parts.append("--cot")
    if run:
        parts.append(f"--run {os.path.relpath(run)} --passages {reader.get('passages', 5)}")
    parts.append(f"--demos {reader.get('demos', 4)} {where}")
    return " ".join(parts)


def run_experiment(path: str | Path, force: bool = False, progress: bool = True) -> dict:
    """Run every stage that is not up to date; write and return the results."""
    from ifqa import evaluation
    from ifqa.retrieval.index import open_index
    from ifqa.retrieval.run import retrieve_to_file
    from ifqa.runs import read_predictions, read_run

    config = load_config(path)
    output = Path(config["_root"]) / config.get("output", f"results/{config['name']}")
    examples, source = _questions(config)
    questions_key = hashlib.sha256(json.dumps([e.to_json() for e in examples], sort_keys=True).encode()).hexdigest()
    depth = int(config.get("k", 20))
    results: dict[str, Any] = {"name": config["name"], "questions": source, "n": len(examples), "retrievers": [], "readers": []}
    runs: dict[str, Path] = {}
    for retriever in config.get("retrievers", []):
        indexes = [_resolve(config, spec) for spec in retriever["indexes"]]
        target = output / "runs" / f"{retriever['name']}-k{depth}.jsonl"
        manifests = [_index_manifest(spec) for spec in indexes]  # enough to tell whether the run is stale
        params = {"indexes": [m.get("corpus", {}).get("sha256") for m in manifests],
                  "index_params": [m.get("params") for m in manifests], "k": depth,
                  "fusion": retriever.get("fusion", "rrf"), "weights": retriever.get("weights"), "questions": questions_key}
        key = _stage_key(params, [])
        if force or not _up_to_date(target, key):
            log.info("retrieve: %s", retriever["name"])
            opened = [open_index(spec) for spec in indexes]
            retrieve_to_file(opened, examples, target, depth, params["fusion"], retriever.get("weights"),
                             progress=progress, source=source)
            _mark(target, key, params)
        else:
            log.info("retrieve: %s is up to date", retriever["name"])
        runs[retriever["name"]] = target
        report = evaluation.summarize_run(read_run(target), examples)
        results["retrievers"].append({"name": retriever["name"], "indexes": retriever["indexes"], **report})
    for reader in config.get("readers", []):
        run = runs.get(reader.get("retriever")) if reader.get("retriever") else None
        row: dict[str, Any] = {"name": reader["name"], "reader": reader.get("reader", "llm"), "mode": reader.get("mode"),
                               "retriever": reader.get("retriever"), "paper": reader.get("paper"),
                               "command": reader_command(config, reader, run)}
        target = output / "predictions" / f"{reader['name']}.jsonl"
        missing = "checkpoint" if row["reader"] == "fid" else "model"
        if not reader.get(missing):
            row["status"] = f"skipped: no {missing} configured"
            results["readers"].append(row)
            continue
        params = {k: v for k, v in reader.items() if k not in ("name", "paper")}
        key = _stage_key({**params, "questions": questions_key}, [run] if run else [])
        if force or not _up_to_date(target, key):
            log.info("read: %s", reader["name"])
            _read(config, reader, examples, run, target, progress, source)
            _mark(target, key, params)
        row["status"] = "ran"
        predictions = read_predictions(target)
        report = evaluation.summarize_predictions(examples, predictions)
        row.update({k: report[k] for k in ("em", "f1", "em_ci95", "f1_ci95", "by_answer_type", "by_question_word")})
        results["readers"].append(row)
    _write_results(output, results)
    return results


def _read(config: dict, reader: dict, examples: list, run: Path | None, target: Path, progress: bool, source: str) -> None:
    if reader.get("reader", "llm") == "fid":
        from ifqa.readers import fid

        fid.read_to_file(_resolve(config, reader["checkpoint"]), examples, run, target, beams=reader.get("beams", 1),
                         progress=progress, source=source)
        return
    from ifqa import data
    from ifqa.readers import backends, llm
    from ifqa.readers.cache import ResponseCache

    if reader.get("backend") == "hf":
        engine = backends.HFBackend(_resolve(config, reader["model"]))
    else:
        engine = backends.OpenAIBackend(reader["model"], reader.get("base_url") or None, chat=not reader.get("completions"))
    train_spec = config.get("train") or {"setting": config["questions"].get("setting", "demo"), "split": "train"}
    train = (data.load_examples(_resolve(config, train_spec["file"])) if "file" in train_spec
             else data.load_split(train_spec.get("setting", "demo"), train_spec.get("split", "train")))
    settings = llm.ReaderConfig(mode=reader.get("mode", "qa"), cot=bool(reader.get("cot")), passages=reader.get("passages", 5),
                                demos=reader.get("demos", 4), selection=reader.get("selection", "random"),
                                seed=reader.get("seed", 0), samples=reader.get("samples", 1),
                                temperature=reader.get("temperature", 0.0), max_tokens=reader.get("max_tokens"),
                                max_prompt_tokens=reader.get("max_prompt_tokens"), concurrency=reader.get("concurrency", 4),
                                setting=train_spec.get("setting", "demo"))
    reader_ = llm.LLMReader(engine, settings, train, ResponseCache(), {e.question.strip() for e in examples})
    llm.read_to_file(reader_, examples, target, run, progress=progress, source=source)


def _ci(values: list | None) -> str:
    return f"[{values[0]:.1f}, {values[1]:.1f}]" if values else ""


def _write_results(output: Path, results: dict) -> None:
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


# --- comparing systems (used by the notebooks) -------------------------------------------------


def output_dir(path: str | Path) -> Path:
    config = load_config(path)
    return Path(config["_root"]) / config.get("output", f"results/{config['name']}")


def load_system_predictions(output: str | Path) -> dict[str, dict[str, str]]:
    """Predictions of every reader that ran: ``name -> {qid: prediction}``."""
    from ifqa.runs import read_predictions

    results = json.loads((Path(output) / "results.json").read_text())
    return {r["name"]: read_predictions(Path(output) / "predictions" / f"{r['name']}.jsonl")
            for r in results["readers"] if r["status"] == "ran"}


def compare(examples: list, a: dict[str, str], b: dict[str, str]) -> dict[str, Any]:
    """Paired comparison of two systems on the same questions (EM and F1)."""
    from ifqa import evaluation

    sa, sb = evaluation.score_predictions(examples, a), evaluation.score_predictions(examples, b)
    return {"em": evaluation.paired_test([s.em for s in sa], [s.em for s in sb]),
            "f1": evaluation.paired_test([s.f1 for s in sa], [s.f1 for s in sb])}


def side_by_side(examples: list, systems: dict[str, dict[str, str]], limit: int = 5, seed: int = 0) -> list[dict]:
    """A few questions with every system's answer, preferring ones where the systems disagree."""
    import random

    from ifqa.evaluation import best_over_answers, exact_match

    rows = []
    for example in examples:
        answers = {name: predictions.get(example.qid, "") for name, predictions in systems.items()}
        correct = {name: bool(best_over_answers(exact_match, answer, example.answers)) for name, answer in answers.items()}
        rows.append({"qid": example.qid, "question": example.question, "gold": " | ".join(example.answers),
                     **{name: f"{answer} {'✓' if correct[name] else '✗'}" for name, answer in answers.items()},
                     "_disagree": len(set(correct.values())) > 1})
    random.Random(seed).shuffle(rows)
    rows.sort(key=lambda row: not row["_disagree"])
    return [{k: v for k, v in row.items() if k != "_disagree"} for row in rows[:limit]]


def split_premise(question: str) -> tuple[str, str]:
    """("If X", "what would Y be?") at the first comma after a leading "If"; ("", question) otherwise."""
    if question.lower().startswith("if ") and "," in question:
        premise, main = question.split(",", 1)
        return premise.strip(), main.strip()
    return "", question


def premise_effect(retriever, examples: list, k: int = 5) -> dict[str, Any]:
    """Does the counterfactual premise help or mislead retrieval? Gold-passage hits in the top k for
    the whole question, the main clause alone and the premise alone, with the questions where the
    premise turned a hit into a miss."""
    from ifqa.evaluation import GoldMatcher

    def hits(queries: list[str]) -> list[bool]:
        results = retriever.search(queries, k)
        return [any(GoldMatcher(e.context).matches(retriever.passages[p]["text"]) for p, _ in hits)
                for e, hits in zip(examples, results)]

    whole = hits([e.question for e in examples])
    main = hits([split_premise(e.question)[1] for e in examples])
    premise = hits([split_premise(e.question)[0] or e.question for e in examples])
    misled = [{"qid": e.qid, "question": e.question,
               "top passage (whole question)": retriever.passages[retriever.search([e.question], 1)[0][0][0]]["title"]}
              for e, w, m in zip(examples, whole, main) if m and not w]
    n = len(examples) or 1
    return {"k": k, "whole question": 100 * sum(whole) / n, "main clause only": 100 * sum(main) / n,
            "premise only": 100 * sum(premise) / n, "misled by the premise": misled,
            "helped by the premise": sum(1 for w, m in zip(whole, main) if w and not m)}
