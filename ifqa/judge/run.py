"""Judging a predictions file: prompts, verdicts, the judgments file and its manifest."""

from __future__ import annotations

import logging
import re
import time
from dataclasses import asdict
from pathlib import Path

from ifqa.artifacts import QuestionSet, write_manifest
from ifqa.errors import IfqaError
from ifqa.io import file_sha256, write_jsonl
from ifqa.judge.config import PLAIN_MAX_TOKENS, JudgeConfig
from ifqa.llm import thinking
from ifqa.llm.backends import GenerationParams
from ifqa.llm.generation import CachedGenerator, Counters
from ifqa.readers.llm.prompts import load_whole_prompt

log = logging.getLogger(__name__)

_VERDICT = re.compile(r"verdict\s*[:=\-]?\s*\**\s*(yes|no)\b", re.I)
_BARE = re.compile(r"^\W*(yes|no)\b", re.I)


def load_prompt(directory: str | Path | None = None) -> tuple[str, str]:
    """The judge's template text and its SHA-256 (recorded, so a changed prompt is a different judge)."""
    return load_whole_prompt("judge", ("question", "answers", "prediction"), directory)


def parse_verdict(text: str) -> bool | None:
    """``True``/``False`` from the last "Verdict: yes|no" line, or a reply that is a bare yes or no; else None."""
    found = list(_VERDICT.finditer(text))
    if found:
        return found[-1].group(1).lower() == "yes"
    bare = _BARE.match(text.strip())
    return bare.group(1).lower() == "yes" if bare else None


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

    An empty prediction is judged "no" without a request. A reply with neither verdict stops the run
    with one line naming the question (every reply received stays in the response cache)."""
    config.require_model()
    template, digest = load_prompt(config.prompts_dir)
    backend = config.backend_instance(api_key)
    thinks = config.thinks(backend)
    max_tokens = config.max_tokens or (config.thinking_max_tokens() if thinks else PLAIN_MAX_TOKENS)
    params = config.params(max_tokens, 0.0, (), config.seed)
    asked = [e for e in questions.examples if predictions.get(e.qid, "").strip()]
    prompts = [
        template.format(question=e.question, answers=" | ".join(e.answers), prediction=predictions[e.qid])
        for e in asked
    ]
    counters = Counters()
    generate = CachedGenerator(backend, config.response_cache(), config.concurrency, counters)
    started = time.time()
    completions = _generate(generate, prompts, params, progress)
    verdicts = {}
    for example, completion in zip(asked, completions):
        reply = thinking.split(completion.text, completion.reasoning, completion.finish_reason, thinks)
        if reply.truncated:
            raise IfqaError(
                f"the judge's reply for qid {example.qid!r} was cut off while thinking; raise --max-tokens "
                "(every reply received is cached)"
            )
        verdict = parse_verdict(reply.answer)
        if verdict is None:
            raise IfqaError(
                f"the judge's reply for qid {example.qid!r} is neither yes nor no ({reply.answer.strip()[:80]!r}); "
                "check the model and prompts/judge.txt (every reply received is cached)"
            )
        reason = _VERDICT.split(reply.answer)[0].strip() if _VERDICT.search(reply.answer) else reply.answer.strip()
        verdicts[example.qid] = {
            "qid": example.qid,
            "verdict": verdict,
            "reason": reason,
            "raw": completion.text,
            **({"reasoning": reply.thinking} if reply.thinking else {}),
        }
    records = [
        verdicts.get(e.qid) or {"qid": e.qid, "verdict": False, "reason": "no prediction", "asked": False}
        for e in questions.examples
    ]
    write_jsonl(output, records)
    write_manifest(
        output,
        questions,
        judge={"model": config.model, "backend": backend.describe(), "prompt_sha256": digest, "thinks": thinks},
        predictions={"path": str(predictions_path), "sha256": file_sha256(predictions_path)}
        if predictions_path
        else None,
        config=asdict(config.public()),
        counters=counters.public(),
        seconds=round(time.time() - started, 2),
    )
    return counters.public()


def _generate(generate, prompts: list[str], params: GenerationParams, progress: bool) -> list:
    """Every prompt through the cache and the backend, in waves that move a progress bar."""
    from tqdm import tqdm

    wave = generate.wave
    out = []
    with tqdm(total=len(prompts), desc="judge", unit="q", disable=not progress) as bar:
        for start in range(0, len(prompts), wave):
            out.extend(generate(prompts[start : start + wave], [params] * len(prompts[start : start + wave])))
            bar.update(len(prompts[start : start + wave]))
    return out
