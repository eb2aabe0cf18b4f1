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
from ifqa.llm import thinking
from ifqa.llm.config import ModelAccess
from ifqa.llm.generation import CachedGenerator, Counters
from ifqa.readers.llm.prompts import load_whole_prompt

#: Tokens for one rewritten question (a thinking model gets its thinking budget on top).
TWIN_MAX_TOKENS = 96
_LABEL = re.compile(r"^\s*(?:\*\*)?(?:factual twin|question|twin)\s*:?(?:\*\*)?\s*", re.I)


def parse_twin(reply: str) -> str:
    """The rewritten question: the reply's first non-empty line, a label such as "Factual twin:" and
    quotes removed; empty when the reply holds no text."""
    for line in reply.splitlines():
        line = _LABEL.sub("", line).strip().strip("\"'`").strip()
        if line:
            return line
    return ""


def twins_by_llm(
    questions: QuestionSet,
    access: ModelAccess,
    api_key: str | None = None,
    progress: bool = True,
    prompts: str | Path | None = None,
) -> tuple[QuestionSet, list[dict]]:
    """The twins and their records (``qid``, ``question``, ``how``, ``model``, ``prompt_sha256``, ``raw``).
    A reply with no question in it, or one cut off while thinking, is one line naming the question."""
    from tqdm import tqdm

    access.require_model()
    template, digest = load_whole_prompt("twin", ("question",), prompts)
    backend = access.backend_instance(api_key)
    thinks = access.thinks(backend)
    params = access.params(access.thinking_max_tokens() if thinks else TWIN_MAX_TOKENS, 0.0, (), 0)
    generate = CachedGenerator(backend, access.response_cache(), access.concurrency, Counters())
    examples = questions.examples
    completions = []
    with tqdm(total=len(examples), desc="twins", unit="q", disable=not progress) as bar:
        for start in range(0, len(examples), generate.wave):
            wave = examples[start : start + generate.wave]
            completions += generate([template.format(question=e.question) for e in wave], [params] * len(wave))
            bar.update(len(wave))
    records = []
    for example, completion in zip(examples, completions):
        reply = thinking.split(completion.text, completion.reasoning, completion.finish_reason, thinks)
        twin = "" if reply.truncated else parse_twin(reply.answer)
        if not twin:
            why = "was cut off while thinking" if reply.truncated else f"holds no question ({completion.text[:60]!r})"
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
                "raw": completion.text,
            }
        )
    return twin_set(questions, {r["qid"]: r["question"] for r in records}, "llm"), records
