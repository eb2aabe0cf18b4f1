"""Judging a predictions file: prompts, verdicts, the judgments file and its manifest."""

from __future__ import annotations

import logging
import re
import time
from dataclasses import asdict
from pathlib import Path

from ifqa.artifacts import QuestionSet, write_manifest
from ifqa.io import file_sha256, write_jsonl
from ifqa.judge.config import PLAIN_MAX_TOKENS, JudgeConfig
from ifqa.llm.session import Ask, ModelSession
from ifqa.readers.llm.prompts import load_whole_prompt

log = logging.getLogger(__name__)

#: A labelled verdict, plain or in markdown: "Verdict: yes", "**Verdict:** no", "The answer is yes.",
#: "Final verdict - NO", "Judgement: yes".
_VERDICT = re.compile(
    r"(?:verdict|judg(?:e)?ment|decision|final\s+answer|the\s+answer\s+is|answer)\W{0,6}(?:is\s+)?\**\s*(yes|no)\b",
    re.I,
)
_BARE = re.compile(r"^\W*(yes|no)\b", re.I)
#: A verdict in words: "the prediction is correct", "Incorrect.", "is not correct", "wrong".
_WORDED = re.compile(r"\b(not\s+correct|incorrect|correct|wrong)\b", re.I)


def load_prompt(directory: str | Path | None = None) -> tuple[str, str]:
    """The judge's template text and its SHA-256 (recorded, so a changed prompt is a different judge)."""
    return load_whole_prompt("judge", ("question", "answers", "prediction"), directory)


def parse_verdict(text: str) -> bool | None:
    """``True``/``False`` from the last labelled verdict ("Verdict: yes", "**Verdict:** no", "The answer
    is yes."), else a reply that starts with yes or no, else the last of "correct" / "incorrect" / "not
    correct" / "wrong"; None: the reply gives no verdict (recorded as unclear)."""
    plain = text.replace("*", "")
    found = list(_VERDICT.finditer(plain))
    if found:
        return found[-1].group(1).lower() == "yes"
    bare = _BARE.match(plain.strip())
    if bare:
        return bare.group(1).lower() == "yes"
    worded = list(_WORDED.finditer(plain))
    if worded:
        return worded[-1].group(1).lower() == "correct"
    return None


def judge(
    config: JudgeConfig,
    predictions: dict[str, str],
    questions: QuestionSet,
    output: str | Path,
    predictions_path: str | Path | None = None,
    api_key: str | None = None,
    progress: bool = True,
) -> dict:
    """Judge every prediction; the judgments JSONL and its manifest are written once every verdict is in.

    An empty prediction is judged "no" without a request. A reply that gives no verdict, or one cut off
    while thinking, is recorded as unclear (``verdict: null``, ``unclear: true``) with its text, counted
    and reported; the run goes on."""
    template, digest = load_prompt(config.prompts_dir)
    session = ModelSession.open(config, api_key)
    asked = [e for e in questions.examples if predictions.get(e.qid, "").strip()]
    prompts = [
        template.format(question=e.question, answers=" | ".join(e.answers), prediction=predictions[e.qid])
        for e in asked
    ]
    started = time.time()
    replies = session.ask_all(prompts, Ask(session.max_tokens(PLAIN_MAX_TOKENS), seed=config.seed), "judge", progress)
    verdicts = {}
    unclear = []
    for example, reply in zip(asked, replies):
        verdict = None if reply.truncated else parse_verdict(reply.answer)
        plain = reply.answer.replace("*", "")
        reason = _VERDICT.split(plain)[0].strip() if _VERDICT.search(plain) else reply.answer.strip()
        verdicts[example.qid] = {
            "qid": example.qid,
            "verdict": verdict,
            "reason": ("cut off while thinking" if reply.truncated else reason) or reply.answer.strip(),
            "raw": reply.raw,
            **({"reasoning": reply.thinking} if reply.thinking else {}),
            **({"unclear": True} if verdict is None else {}),
        }
        if verdict is None:
            unclear.append(example.qid)
    if unclear:
        log.warning(
            "the judge gave no verdict for %d of %d questions (first qid %s): recorded as unclear, counted as no",
            len(unclear),
            len(asked),
            unclear[0],
        )
    records = [
        verdicts.get(e.qid) or {"qid": e.qid, "verdict": False, "reason": "no prediction", "asked": False}
        for e in questions.examples
    ]
    write_jsonl(output, records)
    write_manifest(
        output,
        questions,
        judge={"model": config.model, "backend": session.describe(), "prompt_sha256": digest, "thinks": session.thinks},
        predictions={"path": str(predictions_path), "sha256": file_sha256(predictions_path)}
        if predictions_path
        else None,
        config=asdict(config.public()),
        counters=session.counters.public(),
        unclear=len(unclear),
        seconds=round(time.time() - started, 2),
    )
    return {**session.counters.public(), "unclear": len(unclear)}
