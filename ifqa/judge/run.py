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
#: "Final verdict - NO", "Judgement: yes". Not an answer the reply names (a yes/no question's): "the
#: predicted answer is no", "the gold answer is yes" say what was compared, not the verdict.
_VERDICT = re.compile(
    r"(?:verdict|judg(?:e)?ment|decision|final\s+answer|the\s+answer\s+is|"
    r"(?<!predicted\s)(?<!prediction\s)(?<!gold\s)(?<!expected\s)(?<!reference\s)(?<!correct\s)(?<!model's\s)answer)"
    r"\W{0,6}(?:is\s+)?\**\s*(yes|no)\b",
    re.I,
)
#: A reply that opens with yes or no as a sentence of its own ("Yes.", "No, it names another city", "YES -
#: because it names the same city"), not a phrase that starts with the word ("No doubt, ...", "No-one ...").
_BARE = re.compile(r"^\W*(yes|no)\s*(?:[.!,;:]|[-\u2013\u2014]+(?:\s|$)|$)", re.I)
#: The two words named as a pair, not a verdict: "yes/no", "Yes or no?".
_BOTH = re.compile(r"\byes\s*(?:/|or|and)\s*no\b|\bno\s*(?:/|or|and)\s*yes\b", re.I)
#: A verdict in words, with its negation: "correct", "incorrect", "is not correct", "not wrong".
_WORDED = re.compile(r"\b(not\s+|n't\s+|never\s+)?(correct|incorrect|wrong)\b", re.I)
_POSITIVE = {"correct"}


def load_prompt(directory: str | Path | None = None) -> tuple[str, str]:
    """The judge's template text and its SHA-256 (recorded, so a changed prompt is a different judge)."""
    return load_whole_prompt("judge", ("question", "answers", "prediction"), directory)


def parse_verdict(text: str) -> bool | None:
    """``True``/``False`` from the last labelled verdict ("Verdict: yes", "**Verdict:** no", "The answer
    is yes."), else from what the reply says: a yes or no standing as a sentence at its start, and
    "correct" / "incorrect" / "wrong" with their negations ("not wrong" is correct). A reply that gives
    none, or says both, is unclear (None: recorded and counted, never a guess)."""
    plain = _BOTH.sub(" ", text.replace("*", ""))
    found = list(_VERDICT.finditer(plain))
    if found:
        return found[-1].group(1).lower() == "yes"
    said = set()
    bare = _BARE.match(plain.strip().lstrip("?.! "))
    if bare:
        said.add(bare.group(1).lower() == "yes")
    for negated, word in _WORDED.findall(plain):
        said.add((word.lower() in _POSITIVE) != bool(negated))
    return said.pop() if len(said) == 1 else None


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
        judge={"model": config.model, "prompt_sha256": digest},
        **session.record(),
        predictions={"path": str(predictions_path), "sha256": file_sha256(predictions_path)}
        if predictions_path
        else None,
        config=asdict(config.public()),
        unclear=len(unclear),
        seconds=round(time.time() - started, 2),
    )
    return {**session.counters.as_dict(), "unclear": len(unclear)}
