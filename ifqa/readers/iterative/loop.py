"""The iterative reading loop: the model reasons, asks for evidence, reads it, goes on (the protocols,
``search-tags`` and ``ircot``, as docs/readers.md describes them). Every active question of a wave
advances one step at a time, together. The model's text is data: a query is what stands inside the
innermost ``<search>`` tag, with no tag text in it. The prompt shows a sliding window of passages:
the newest stay, the oldest leave first, within the passage count and the prompt's token budget."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from ifqa.eval.passages import GoldMatcher, has_answer
from ifqa.readers.llm import answers
from ifqa.readers.llm.prompts import number_passages

_TAG = re.compile(r"</?\s*[A-Za-z][\w-]*\s*>")
_PROTOCOL_TAG = re.compile(r"</?\s*(?:search|answer|result)\s*>", re.I)  # a query ends at the next one
_OPEN_SEARCH = re.compile(r"<search>", re.I)
_CLOSE_SEARCH = re.compile(r"</search>", re.I)
_ANSWER = re.compile(r"<answer>(.*?)(</answer>|$)", re.S | re.I)
_SENTENCE_ANSWER = re.compile(r"answer is\s*:?\s*(.+)", re.I | re.S)
_LABEL = re.compile(r"^\s*(?:final\s+)?answer\s*:", re.I | re.M)
NO_PASSAGES = "(no passages found)"
SEARCHED_BEFORE = "(searched before: see above)"
LEFT_OUT = "(these passages left the prompt to make room for newer ones)"


@dataclass
class Search:
    """A search request found in the model's text: where its tags end, and the query (tags taken out)."""

    start: int
    end: int
    query: str


def find_search(text: str) -> Search | None:
    """The first search request: the text after the last ``<search>`` before the first ``</search>``
    (or the end, where generation stopped at the closing tag), up to the next tag of the protocol
    (an unclosed search followed by ``<answer>``), any other tag taken out of it."""
    close = _CLOSE_SEARCH.search(text)
    limit = close.start() if close else len(text)
    opens = [m for m in _OPEN_SEARCH.finditer(text) if m.start() < limit]
    if not opens:
        return None
    inner = _PROTOCOL_TAG.split(text[opens[-1].end() : limit], 1)[0]
    return Search(opens[0].start(), close.end() if close else len(text), " ".join(_TAG.sub(" ", inner).split()))


@dataclass
class Trace:
    """One question's way through the loop, as its record keeps it. The transcript is kept in parts
    (the model's text, and each search's passages by id), so the prompt can show the window."""

    example: Any
    matcher: GoldMatcher
    steps: list[dict] = field(default_factory=list)
    shown: dict[str, dict] = field(default_factory=dict)  # id -> passage, in the order they were shown
    searched: set[str] = field(default_factory=set)
    parts: list[str | list[str]] = field(default_factory=list)  # text, or a result block's passage ids
    answer: str | None = None
    stopped: str | None = None
    sentences: bool = False  # IRCoT: the transcript is the model's sentences, its passages shown apart

    @property
    def done(self) -> bool:
        return self.stopped is not None

    def transcript(self, window: set[str] | None = None) -> str:
        """The transcript, each result block showing its passages that are in ``window`` (None: all);
        IRCoT's is the model's sentences joined by spaces."""
        if self.sentences:
            return " ".join(p for p in self.parts if isinstance(p, str) and p)
        out = []
        for part in self.parts:
            if isinstance(part, str):
                out.append(part)
                continue
            if part and part[0] in (NO_PASSAGES, SEARCHED_BEFORE):
                out.append(f"<result>\n{part[0]}\n</result>\n")
                continue
            kept = [self.shown[i] for i in part if window is None or i in window]
            out.append(f"<result>\n{number_passages(kept) if kept else LEFT_OUT}\n</result>\n")
        return "".join(out)

    def record(self) -> dict:
        last = self.steps[-1]["text"] if self.steps else ""
        return {
            "qid": self.example.qid,
            "prediction": self.answer if self.stopped == "answer" and self.answer is not None else "",
            "raw": last,
            "reasoning": self.transcript().strip(),
            "stopped": self.stopped,
            "searches": sum(1 for s in self.steps if s.get("query") and not s.get("repeated")),
            "steps": self.steps,
            **({"truncated": True} if self.stopped == "truncated" else {}),
        }


def read_step(trace: Trace, reply, protocol: str) -> str | None:
    """Take one model turn (a ``session.Reply``) into ``trace``; returns the query it asks (None:
    answered, stopped or no query)."""
    text = reply.raw if protocol == "search-tags" else reply.answer
    step: dict[str, Any] = {"text": text}
    trace.steps.append(step)
    if reply.truncated and find_search(reply.raw or "") is None:
        trace.stopped = "truncated"
        return None
    if protocol == "search-tags":
        return _search_tags(trace, step, text, reply.answer)
    return _ircot(trace, step, text)


def _search_tags(trace: Trace, step: dict, text: str, answer_text: str) -> str | None:
    search, answer = find_search(text), _ANSWER.search(text)
    if answer and (search is None or answer.start() < search.start):
        closed = answer.group(2) != ""
        trace.parts.append(text[: answer.end()] + ("" if closed else "</answer>") + "\n")
        trace.answer, trace.stopped = answers.clean(_TAG.sub(" ", answer.group(1))), "answer"
        return None
    if search is not None:
        trace.parts.append(text[: search.start] + f"<search>{search.query}</search>\n")
        step["query"] = search.query
        if not search.query:
            step["note"] = "empty query"
        return search.query or None
    trace.parts.append(text + "\n")
    if _SENTENCE_ANSWER.search(answer_text) or _LABEL.search(answer_text):  # answered without the tags
        trace.answer, trace.stopped = answers.extract(answer_text, reasoning=True)[0], "answer"
        return None
    step["note"] = "no search or answer tag"
    return None


def _ircot(trace: Trace, step: dict, text: str) -> str | None:
    sentence = " ".join(_TAG.sub(" ", text).split())
    trace.parts.append(sentence)
    found = _SENTENCE_ANSWER.search(sentence)
    if found:
        trace.answer, trace.stopped = answers.clean(found.group(1)), "answer"
        return None
    step["query"] = sentence
    if not sentence:
        step["note"] = "empty sentence"
    return sentence or None


def add_passages(trace: Trace, step: dict | None, hits: list) -> list[str]:
    """The new passages of a search (not shown before), all of them: which ones the prompt shows is the
    window's choice. The step records each one's id and whether it is a gold passage (for recall over
    all steps) and holds the answer string (the premise analysis asks)."""
    new = [h for h in hits if h.id not in trace.shown]
    for hit in new:
        trace.shown[hit.id] = {"id": hit.id, "title": hit.title, "text": hit.text}
    if step is not None:
        answers_ = trace.example.answers
        step["passages"] = [
            {"id": h.id, "gold": trace.matcher.matches(h.text), "has_answer": has_answer(answers_, h.text)} for h in new
        ]
    return [h.id for h in new]
