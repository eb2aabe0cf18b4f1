"""A reasoning model's tags, all of them: every entry of ``thinking.THINKING_TAGS`` with every answer label
models write after their thinking, in every shape a server sends it (inline, opened by the chat
template, cut off at the token limit); then each tag end to end through ``ifqa read llm``. The table
is walked, so a model added to it is tested without a new row here."""

from __future__ import annotations

import json
import os

import pytest

from ifqa.datasets.demo import load_demo
from ifqa.llm.protocol import Backend, Completion
from ifqa.llm.session import Ask, ModelSession
from ifqa.llm.thinking import THINKING_TAGS
from ifqa.readers.llm.answers import extract
from ifqa.readers.llm.config import LLMReaderConfig
from tests.readers.fake_openai import FakeOpenAI

DRAFT = "Lyon"  # the wrong answer a thinking drafts, on a line of its own
#: How models label the answer after their thinking.
LABELS = {
    "bare": "{a}",
    "markdown final answer": "**Final Answer:** {a}",
    "final answer": "Final answer: {a}",
    "the answer is": "The answer is {a}.",
    "boxed": "\\boxed{{{a}}}",
    "bold": "**{a}**",
}


class _Backend(Backend):
    def describe(self):
        return {"backend": "stand-in", "model": "reasoner", "chat": True}


def _session() -> ModelSession:
    return ModelSession(_Backend(), LLMReaderConfig(model="reasoner", thinking="on"))


def _reply(tags, label: str, shape: str) -> Completion:
    thought = f"The premise moves the city.\n\n{DRAFT}\n\nWait, it is the other one."
    answer = LABELS[label].format(a="Paris")
    head, tail = tags.answer_head, tags.answer_tail
    if shape == "inline":
        return Completion(f"{tags.open}{thought}{tags.close}{head}\n{answer}{tail}", finish_reason="stop")
    if shape == "opened by the template":
        return Completion(f"{thought}{tags.close}{head}\n{answer}{tail}", finish_reason="stop")
    return Completion(f"{tags.open}{thought} and more", finish_reason="length")  # cut off at the limit


@pytest.mark.parametrize("tags", THINKING_TAGS, ids=[t.models for t in THINKING_TAGS])
@pytest.mark.parametrize("shape", ["inline", "opened by the template", "cut off"])
@pytest.mark.parametrize("label", LABELS)
def test_every_tag_with_every_label_in_every_shape(tags, shape, label):
    reply = _session().reply_of(_reply(tags, label, shape), Ask(64))
    if shape == "cut off":
        assert reply.truncated and reply.answer == ""  # no answer, never the draft
        return
    assert not reply.truncated and DRAFT in reply.thinking
    assert extract(reply.answer, reasoning=True)[0] == "Paris"
    assert DRAFT not in reply.answer and tags.close not in reply.answer and tags.open not in reply.answer


@pytest.fixture
def env(tmp_path):
    return {**os.environ, "IFQA_CACHE_DIR": str(tmp_path / "cache"), "OPENAI_API_KEY": "sk-test"}


@pytest.mark.parametrize("tags", THINKING_TAGS, ids=[t.models for t in THINKING_TAGS])
@pytest.mark.parametrize("shape", ["think", "open"])
def test_every_tag_through_the_reader(cli, env, tmp_path, tags, shape):
    dev = load_demo("dev")[:4]
    questions = tmp_path / "q.jsonl"
    questions.write_text(
        "".join(json.dumps({"idx": e.qid, "question": e.question, "answers": e.answers}) + "\n" for e in dev)
    )
    with FakeOpenAI({e.question: e.answers[0] for e in dev}) as server:
        server.thinking, server.tags = shape, (tags.open, tags.close + tags.answer_head)
        out = tmp_path / "p.jsonl"
        args = ["read", "llm", "--model", "m", "--thinking", "on", "--base-url", server.url, "--demos", "0"]
        result = cli(*args, "--questions", questions, "-o", out, "--no-progress", env=env)
        assert result.returncode == 0, result.stderr
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["prediction"] for r in records] == [e.answers[0] for e in dev]
    assert all("Wait, reconsider" in r["reasoning"] for r in records)
