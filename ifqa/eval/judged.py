"""The LLM judge's verdicts in the predictions report: judge accuracy with its interval, and how far
the judge agrees with EM (Cohen's kappa, and the questions where they disagree), so that a lenient
judge shows beside the strict metric instead of hiding behind it."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ifqa.errors import IfqaError
from ifqa.eval.answers import score_predictions
from ifqa.eval.passages import percent
from ifqa.eval.significance import bootstrap_ci, cohen_kappa
from ifqa.io import file_sha256, read_jsonl, read_manifest_object


def read_judgments(path: str | Path, predictions_path: str | Path | None = None) -> tuple[dict[str, bool | None], dict]:
    """``qid -> verdict`` (None: the judge's reply gave none, recorded as unclear) and the judge's
    description, from ``ifqa judge``'s output; refused when made for another version of
    ``predictions_path`` (its manifest records the file's SHA-256)."""
    verdicts: dict[str, bool | None] = {}
    for number, record in read_jsonl(path):
        valid = isinstance(record, dict) and "qid" in record
        if valid and not isinstance(record.get("verdict"), bool):
            valid = record.get("verdict") is None and record.get("unclear") is True
        if not valid:
            raise IfqaError(
                "each line needs 'qid' and a true/false 'verdict', or null with 'unclear': true (ifqa judge writes them)",
                path,
                number,
            )
        qid = str(record["qid"])
        if qid in verdicts:
            raise IfqaError(f"duplicate qid {qid!r}", path, number)
        verdicts[qid] = record["verdict"]
    if not verdicts:
        raise IfqaError("holds no verdicts", path)
    manifest_file = Path(f"{path}.manifest.json")
    manifest = read_manifest_object(manifest_file) if manifest_file.exists() else {}
    judged = (manifest.get("predictions") or {}).get("sha256")
    if predictions_path is not None and judged and judged != file_sha256(predictions_path):
        raise IfqaError(
            f"was judged on another version of {predictions_path} (its SHA-256 differs); judge it again", path
        )
    judge = manifest.get("judge") or {}
    return verdicts, {"model": judge.get("model", "unknown"), "prompt_sha256": judge.get("prompt_sha256", "")}


def summarize_judgments(
    examples: Sequence[Any], predictions: Mapping[str, str], verdicts: Mapping[str, bool | None], judge: dict
) -> dict[str, Any]:
    """Judge accuracy (a question without a verdict, or with an unclear one, counts as no) and its
    agreement with EM; the unclear verdicts are counted and named."""
    missing = [e.qid for e in examples if e.qid in predictions and e.qid not in verdicts]
    if missing:
        raise IfqaError(
            f"the judgments hold no verdict for {len(missing)} answered questions (first qid {missing[0]!r}); "
            "judge these predictions with ifqa judge"
        )
    said = [bool(verdicts.get(e.qid, False)) for e in examples]
    em = [score.em == 1.0 for score in score_predictions(examples, predictions)]
    return {
        "judge_accuracy": round(percent([float(v) for v in said]), 2),
        "judge_accuracy_ci95": list(bootstrap_ci([float(v) for v in said])),
        "judge": {
            **judge,
            "unclear": [e.qid for e in examples if e.qid in verdicts and verdicts[e.qid] is None],
            "kappa_em": cohen_kappa(said, em),
            "disagreements": {
                "judge_yes_em_no": [e.qid for e, j, m in zip(examples, said, em) if j and not m],
                "judge_no_em_yes": [e.qid for e, j, m in zip(examples, said, em) if m and not j],
            },
        },
    }
