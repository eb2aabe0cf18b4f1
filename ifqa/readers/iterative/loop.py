"""The iterative reading loop: the model reasons, asks for evidence, reads it, goes on.

Every question advances one step at a time, all active questions of a wave together (their requests
go out concurrently, through the response cache, so a resumed run sends no request twice: retrieval
is deterministic, so a cached step meets the same passages). A step is one model turn:

- ``search-tags`` (Search-o1, Search-R1, R1-Searcher): the model writes ``<search>query</search>``
  (generation stops at the closing tag); the passages go back between ``<result>`` tags and the model
  continues; ``<answer>...</answer>`` ends the question.
- ``ircot`` (IRCoT, Trivedi et al. 2023): the question retrieves first; each step writes one sentence of
  reasoning, which is the next query, its new passages joining the prompt; a sentence that gives "the
  answer is" ends the question.

A query asked before is not searched again; passages already shown are not shown twice; the step
budget stops a model that never answers (its record says so), and its last text is read for an answer.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from ifqa.eval.passages import GoldMatcher, has_answer
from ifqa.llm import thinking
from ifqa.readers.llm import answers
from ifqa.readers.llm.prompts import number_passages

_SEARCH = re.compile(r"<search>(.*?)(?:</search>|$)", re.S | re.I)
_ANSWER = re.compile(r"<answer>(.*?)(?:</answer>|$)", re.S | re.I)
_SENTENCE_ANSWER = re.compile(r"answer is\s*:?\s*(.+)", re.I | re.S)
_LABEL = re.compile(r"^\s*(?:final\s+)?answer\s*:", re.I | re.M)
NO_PASSAGES = "(no passages found)"


@dataclass
class Trace:
    """One question's way through the loop, as its record keeps it."""

    example: Any
    matcher: GoldMatcher
    steps: list[dict] = field(default_factory=list)
    shown: dict[str, dict] = field(default_factory=dict)  # id -> passage, in the order they were shown
    searched: set[str] = field(default_factory=set)
    transcript: str = ""
    answer: str | None = None
    stopped: str | None = None

    @property
    def done(self) -> bool:
        return self.stopped is not None

    def record(self) -> dict:
        last = self.steps[-1]["text"] if self.steps else ""
        prediction = self.answer if self.answer is not None else answers.extract(last, reasoning=True)[0]
        return {
            "qid": self.example.qid,
            "prediction": "" if self.stopped == "truncated" else prediction,
            "raw": last,
            "reasoning": self.transcript.strip(),
            "stopped": self.stopped,
            "searches": sum(1 for s in self.steps if s.get("query") and not s.get("repeated")),
            "steps": self.steps,
            **({"truncated": True} if self.stopped == "truncated" else {}),
        }


def passage_lines(passages: list[dict]) -> str:
    """Passages as every prompt shows them (``prompts.number_passages``), or a line saying none was found."""
    return number_passages(passages) if passages else NO_PASSAGES


def read_step(trace: Trace, completion, protocol: str, thinks: bool) -> str | None:
    """Take one model turn into ``trace``; returns the query it asks (None: answered, stopped or no query)."""
    reply = thinking.split(completion.text, completion.reasoning, completion.finish_reason, thinks)
    text = completion.text if protocol == "search-tags" else reply.answer
    step: dict[str, Any] = {"text": text}
    trace.steps.append(step)
    if reply.truncated and not _SEARCH.search(completion.text or ""):
        trace.stopped = "truncated"
        return None
    if protocol == "search-tags":
        return _search_tags(trace, step, text, reply)
    return _ircot(trace, step, text)


def _search_tags(trace: Trace, step: dict, text: str, reply) -> str | None:
    search, answer = _SEARCH.search(text), _ANSWER.search(text)
    if answer and (not search or answer.start() < search.start()):
        trace.transcript += text[: answer.end()] + "</answer>\n"
        trace.answer, trace.stopped = answers.clean(answer.group(1)), "answer"
        return None
    if search:
        trace.transcript += text[: search.end()].removesuffix("</search>") + "</search>\n"
        query = " ".join(search.group(1).split())
        step["query"] = query
        if not query:
            step["note"] = "empty query"
        return query or None
    trace.transcript += text + "\n"
    if _SENTENCE_ANSWER.search(reply.answer) or _LABEL.search(reply.answer):  # answered without the tags
        trace.answer, trace.stopped = answers.extract(reply.answer, reasoning=True)[0], "answer"
        return None
    step["note"] = "no search or answer tag"
    return None


def _ircot(trace: Trace, step: dict, text: str) -> str | None:
    sentence = " ".join(text.split())
    trace.transcript += (" " if trace.transcript else "") + sentence
    found = _SENTENCE_ANSWER.search(sentence)
    if found:
        trace.answer, trace.stopped = answers.clean(found.group(1)), "answer"
        return None
    step["query"] = sentence
    if not sentence:
        step["note"] = "empty sentence"
    return sentence or None


def add_passages(trace: Trace, step: dict | None, hits: list, room: int) -> list[dict]:
    """The new passages of a search (not shown before), as many as the prompt has room for; the step
    records each one's id and whether it is a gold passage (for recall over all steps)."""
    new = [h for h in hits if h.id not in trace.shown][: max(room, 0)]
    for hit in new:
        trace.shown[hit.id] = {"id": hit.id, "title": hit.title, "text": hit.text}
    if step is not None:  # gold passage, and the answer string in it (the premise analysis asks)
        answers_ = trace.example.answers
        step["passages"] = [
            {"id": h.id, "gold": trace.matcher.matches(h.text), "has_answer": has_answer(answers_, h.text)} for h in new
        ]
    return [trace.shown[h.id] for h in new]
