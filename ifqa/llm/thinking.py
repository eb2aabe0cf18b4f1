"""Reasoning models: their thinking told apart from their answer (``split``), in every shape servers send
it (docs/readers.md, "Reasoning models"), and which models think (``resolve``). A completion cut off
inside its thinking has no answer, never a draft from inside its thinking."""

from __future__ import annotations

import re
from dataclasses import dataclass

# Tokens a reasoning model may write by default: thinking on IfQA-style questions takes hundreds to a
# few thousand tokens (DeepSeek-R1 and Qwen3 are evaluated with up to 32,768); 8,192 leaves room for
# long thinking plus the answer without letting a looping model run for minutes per question.
REASONING_MAX_TOKENS = 8192
ANSWER_ROOM = 1024  # tokens kept for the answer when only --thinking-budget is given
# Names of models that think before answering (matched anywhere in the model name, case-insensitive):
# DeepSeek-R1 and its distills, QwQ, Qwen3 (hybrid, thinking by default; its *-Instruct-2507 releases
# do not think), OpenAI's o-series, GPT-5 and gpt-oss, Magistral, and names that say so.
REASONING_NAMES = re.compile(
    r"(?:^|[/_\-.:])(?:r1|qwq|o[134](?:-mini|-pro)?|gpt-5|gpt-oss|magistral|reasoner|reasoning|thinking)(?:$|[/_\-.:])"
    r"|deepseek-r1|qwen3(?!.*instruct)",
    re.I,
)
# OpenAI's reasoning models take max_completion_tokens and reasoning_effort, and refuse temperature,
# top_p and stop; every other endpoint takes the usual parameters.
OPENAI_REASONING = re.compile(r"^(?:openai/)?(?:o[134]|gpt-5)(?:$|[-.])", re.I)


@dataclass(frozen=True)
class ThinkingTags:
    """How one family of models marks its thinking inline, as written: the opening and closing tags,
    and what stands before the answer after them (gpt-oss's final-channel header, which a
    ``<|start|>assistant`` may precede) and after the answer (its end marker)."""

    models: str
    open: str
    close: str
    answer_head: str = ""
    answer_tail: str = ""


#: The thinking markers of the reasoning models docs/readers.md lists, as they write them when a server
#: parses nothing (tests/llm/test_thinking_tags.py reads each, with every answer label, in every shape).
THINKING_TAGS = (
    ThinkingTags("DeepSeek-R1 and its distills, Qwen3, QwQ", "<think>", "</think>"),
    ThinkingTags("models prompted to think in tags", "<thinking>", "</thinking>"),
    ThinkingTags("models prompted to reason in tags", "<reasoning>", "</reasoning>"),
    ThinkingTags("Magistral", "[THINK]", "[/THINK]"),
    ThinkingTags(
        "gpt-oss (harmony format)",
        "<|channel|>analysis<|message|>",
        "<|end|>",
        answer_head="<|channel|>final<|message|>",
        answer_tail="<|return|>",
    ),
)


def _any(texts) -> re.Pattern:
    return re.compile("|".join(re.escape(t) for t in texts if t), re.I)


_OPEN = _any(t.open for t in THINKING_TAGS)
_CLOSE = _any(t.close for t in THINKING_TAGS)
_ANSWER_HEAD = re.compile(
    r"^\s*(?:<\|start\|>assistant)?(?:" + _any(t.answer_head for t in THINKING_TAGS).pattern + ")", re.I
)
_ANSWER_TAIL = re.compile("(?:" + _any(t.answer_tail for t in THINKING_TAGS).pattern + r")\s*$", re.I)


@dataclass(frozen=True)
class Split:
    """A completion told apart: ``answer`` is the text to read an answer from (empty when truncated)."""

    answer: str
    thinking: str = ""
    truncated: bool = False


def split(text: str, reasoning: str = "", finish_reason: str | None = None, thinks: bool = False) -> Split:
    """The answer text, the thinking and whether the thinking was cut off.

    ``reasoning``: a separate reasoning field's text. ``thinks``: the model is known to think first
    (``resolve``), so a reply cut at the token limit with no tag at all is cut inside its thinking
    (a template that opened the thinking block, with a server that parses nothing)."""
    text = text or ""
    thinking = [reasoning.strip()] if reasoning and reasoning.strip() else []
    closes = list(_CLOSE.finditer(text))
    if closes:  # everything up to the last closing tag is thinking (its opening tag may be the template's)
        last = closes[-1]
        thinking.append(_OPEN.sub("", _CLOSE.sub("", text[: last.start()])).strip())
        text = _ANSWER_TAIL.sub("", _ANSWER_HEAD.sub("", text[last.end() :]))
    opened = _OPEN.search(text)
    if opened:  # a thinking block opened and never closed: everything after it is unfinished thinking
        thinking.append(text[opened.end() :].strip())
        answer = text[: opened.start()].strip()
        return Split(answer, _join(thinking), truncated=not answer)
    answer = text.strip()
    if not answer and finish_reason == "length":  # the limit was reached before any answer (hidden reasoning too)
        return Split("", _join(thinking), truncated=True)
    if thinks and not thinking and finish_reason == "length":  # no tag, no field, cut off: the template's thinking
        return Split("", answer, truncated=True)
    return Split(answer, _join(thinking))


def _join(parts: list[str]) -> str:
    return "\n\n".join(p for p in parts if p)


def resolve(thinking: str, model: str | None, template_thinks: bool = False, asked: bool = False) -> bool:
    """Whether the model thinks: ``on``/``off`` as said; ``auto`` from its name, its chat template, or a
    reasoning setting asked for (``asked``: a thinking budget or a reasoning effort)."""
    if thinking != "auto":
        return thinking == "on"
    # by the model's own name: the last part of a hub id or a path (its folders say nothing of the model)
    return asked or template_thinks or bool(model and REASONING_NAMES.search(model.rstrip("/").rsplit("/", 1)[-1]))


def opened_tag(prompt: str) -> str:
    """The tag (``<think>``) of a thinking block a formatted chat prompt ends inside (the template wrote
    it, so the completion starts inside the thinking), or ``""``."""
    tail = prompt.rstrip()[-200:]
    opens, closes = list(_OPEN.finditer(tail)), list(_CLOSE.finditer(tail))
    if opens and (not closes or closes[-1].start() < opens[-1].start()):
        return opens[-1].group(0)
    return ""


def opens(text: str) -> bool:
    """``text`` holds an opening thinking tag."""
    return _OPEN.search(text) is not None


def closes(text: str) -> bool:
    """``text`` holds a closing thinking tag."""
    return _CLOSE.search(text) is not None
