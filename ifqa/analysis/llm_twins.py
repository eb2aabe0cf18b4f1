"""Factual twins written by an LLM: the predictions' own model (or any ``ModelAccess``) rewrites each
counterfactual question without its premise (``prompts/twin.txt``). Every reply goes through the
response cache, so a resumed or repeated analysis sends no request twice, and each twin is kept with
the prompt's SHA-256 and the model's raw reply (``twins.jsonl``), so the twins can be checked and
reused as a file (``--twins FILE``)."""

from __future__ import annotations

import re
from pathlib import Path

from ifqa.analysis.twins import twin_set
from ifqa.artifacts import QuestionSet
from ifqa.errors import IfqaError
from ifqa.llm.config import ModelAccess
from ifqa.llm.session import Ask, ModelSession
from ifqa.readers.llm.prompts import load_whole_prompt

#: Tokens for one rewritten question (a thinking model gets its thinking budget on top).
TWIN_MAX_TOKENS = 96
_LABEL = re.compile(r"^\s*(?:\*\*)?(?:factual twin|question|twin)\s*:?(?:\*\*)?\s*", re.I)


#: How a question starts, where a model left out its question mark.
_ASKS = re.compile(
    r"^(?:what|which|who|whom|whose|when|where|why|how|is|are|was|were|do|does|did|can|could|will|would|has|have|"
    r"had|should|in\s+(?:what|which)|on\s+(?:what|which)|at\s+(?:what|which)|for\s+(?:what|which))\b",
    re.I,
)


def parse_twin(reply: str) -> str:
    """The rewritten question: the reply's first non-empty line, a label such as "Factual twin:" and
    quotes removed; empty when the reply holds no text, or no question ("I cannot rewrite this.")."""
    for line in reply.splitlines():
        line = _LABEL.sub("", line).strip().strip("\"'`*").strip()
        if line:
            return line if line.endswith("?") or _ASKS.match(line) else ""  # a question mark, or a question's start
    return ""


def twins_by_llm(
    questions: QuestionSet,
    access: ModelAccess,
    api_key: str | None = None,
    progress: bool = True,
    prompts: str | Path | None = None,
) -> tuple[QuestionSet, list[dict], dict]:
    """The twins, their records (``qid``, ``question``, ``how``, ``model``, ``prompt_sha256``, ``raw``) and
    the model session's record (as every command keeps it). A reply with no question in it, or one cut
    off while thinking, is one line naming the question."""
    template, digest = load_whole_prompt("twin", ("question",), prompts)
    session = ModelSession.open(access, api_key)
    examples = questions.examples
    replies = session.ask_all(
        [template.format(question=e.question) for e in examples],
        Ask(session.max_tokens(TWIN_MAX_TOKENS)),
        "twins",
        progress,
    )
    records = []
    for example, reply in zip(examples, replies):
        twin = "" if reply.truncated else parse_twin(reply.answer)
        if not twin:
            why = "was cut off while thinking" if reply.truncated else f"holds no question ({reply.raw[:60]!r})"
            raise IfqaError(
                f"the twin model's reply for qid {example.qid!r} {why}; check the model and prompts/twin.txt "
                "(every reply received is cached)"
            )
        records.append(
            {
                "qid": example.qid,
                "question": twin,
                "how": "llm",
                "model": access.model,
                "prompt_sha256": digest,
                "raw": reply.raw,
            }
        )
    return twin_set(questions, {r["qid"]: r["question"] for r in records}, "llm"), records, session.record()
