"""Short answers out of model chatter, and majority voting over samples."""

from __future__ import annotations

import collections
import re
from collections.abc import Sequence

from ifqa.eval import multiple_choice
from ifqa.eval.answers import normalize_answer

#: "the answer is X" as models write it: "So the answer is X", "The final answer would be X", "The
#: answer to this question is: X", "The correct answer is **X**" (X may be empty: a model that stopped
#: there gave no answer).
_SO_THE_ANSWER = re.compile(
    r"(?:so\s+)?the\s+(?:final\s+|correct\s+|short\s+|right\s+)?answer(?:\s+to\s+(?:this|the|your|that)\s+question)?"
    r"\s+(?:is(?:\s+(?-i:that))?|would\s+be|will\s+be)\b\s*:?[ \t]*(.*)",
    re.I | re.S,
)
#: An answer label at a line's start, plain or in markdown: "Answer: X", "Final Answer: X",
#: "**Final Answer:** X", "### Answer: X", "A: X".
_ANSWER_LABEL = re.compile(r"^[ \t#>*_-]*(?:final\s+|short\s+)?(?:answer|a)\s*[*_]*\s*:\s*[*_]*[ \t]*(.*)", re.I | re.M)
#: A line that restates the question instead of answering it ("Question: If ...", "The question is
#: asking ...", "If the river dried up, what would ...?").
_RESTATES = re.compile(r"^\s*(?:\**\s*question\s*\**\s*:|the\s+question\s+(?:is|asks|was))", re.I)
#: Openers before an answer, each a whole word and a phrase of its own, punctuated ("Sure!", "Okay,",
#: "What a delightful question!", "Great question.", "Here is the answer:", "Let me think."): never
#: the start of an answer that begins with such a word ("Great Britain", "Good Friday", "Oklahoma").
_OPENER = re.compile(
    r"^\s*(?:(?:sure|certainly|of\s+course|okay|ok|alright|absolutely|hmm+)\s*[,.!:;]+\s*"
    r"|(?:what\s+an?\s+)?(?:(?:very|really|truly)\s+)?(?:great|good|interesting|fascinating|excellent|delightful"
    r"|intriguing|tricky|fun|nice|wonderful|thought-provoking|challenging)\s+question\b[^.!?:\n]{0,40}[.!?:]+\s*"
    r"|here(?:\s+is|'s|\s+are)\s+(?:the|my|an?)\s+(?:short\s+|final\s+)?(?:answer|response)s?\b[^.!?:\n]{0,40}[.!?:]+\s*"
    r"|let(?:'s|\s+me)\s+(?:think|see|answer)\b[^.!?:\n]{0,40}[.!?:]+\s*)+",
    re.I,
)
#: A sentence that says the question back before the answer ("The question asks what colour it would be.").
_RESTATEMENT = re.compile(r"^\s*the\s+question\s+(?:is|asks|was)\b[^?.!\n]*[?.!]\s*", re.I)
#: An explanation after the answer ("Paris because the premise moves the capital", "YES - because ...",
#: "Paris; since ..."), with the punctuation that sets it off.
_BECAUSE = re.compile(r"(?:\s*[,;:]\s*|\s*[-–—]+\s*|\s+)(?:because|since)\s.*$", re.I | re.S)
#: "It would be X": the answer in a sentence of its own.
_IT_WOULD_BE = re.compile(r"^(?:it|this|that)\s+(?:would|will|could|might)\s+(?:be|have\s+been)\s+(?=\S)", re.I)
_QUOTES = "\"'“”‘’`*_"
#: An answer that starts with a double-quoted span (closed before the end).
_QUOTED = re.compile(r'^\s*[*_]*["“]([^"“”\n]+)["”]')
#: A sentence about the answer before it ("The answer to this question depends on the premise.", "The
#: answer to this question requires an entity."): SmolLM2 writes these; what follows is the answer.
_PREAMBLE = re.compile(
    r"^\s*the\s+answer(?:\s+to\s+(?:this|the|your|that)\s+question)?\s+(?:depends|requires|relies|lies|can|cannot|"
    r"may|might|will\s+depend|would\s+depend|is\s+not|isn't|varies|involves)\b[^.!?\n]*[.!?]\s*",
    re.I,
)
#: "The answer is", "The answer to this question is:", "Final Answer:" at an answer's start (quotes and
#: markdown before it): taken off, as often as a model repeats it.
_LEAD = re.compile(
    r"^[\s*_\"'“”]*(?:so\s+)?(?:the\s+)?(?:final\s+|correct\s+|short\s+|right\s+)?answer"
    r"(?:\s+to\s+(?:this|the|your|that)\s+question)?\s*[*_]*\s*(?:is(?:\s+(?-i:that))?\b|would\s+be\b|will\s+be\b|:)[*_]*\s*:?\s*",
    re.I,
)
#: The start of such a lead and nothing after it ("The answer to this", cut off mid-loop), or the answer
#: named as itself ("The answer is the answer to the question ..."): no answer either way.
_CUT_LEAD = re.compile(r"^[\s*_\"'“”]*(?:the\s+)?(?:final\s+)?answer(?:\s+to\b.*|[\s.]*)$", re.I | re.S)
#: What a looping lead repeats: a reply cut off inside it ("... the answer is that the") names nothing.
_LOOP_WORDS = "the answer is that"
#: A question that asks back (a premise, a "would"): a title that is a question ("Who is Sylvia?") is short
#: and asks nothing of the premise, and is an answer.
_ASKS_BACK = re.compile(r"^\W*if\b|\b(?:would|will|could|should|might)\b", re.I)
_TITLE_WORDS = 6


def _asks_back(answer: str) -> bool:
    """Whether ``answer`` is the question said back, not a title that is a question."""
    text = answer.rstrip(_QUOTES + " .")
    if not text.endswith("?"):
        return False
    return len(text.split()) > _TITLE_WORDS or bool(_ASKS_BACK.search(text))


_BOXED = re.compile(r"\\boxed\{((?:[^{}]|\{[^{}]*\})*)\}")


def extract(output: str, reasoning: bool = False) -> tuple[str, str]:
    """``(answer, rationale)`` from a completion.

    Takes the last ``\\boxed{...}``, else what follows the last "the answer is" (or an "Answer:"
    label, markdown included), else, without reasoning, the first line that does not restate the
    question (with reasoning, the last line); then ``clean`` takes the chatter off it. A model that
    writes "The answer to this question is:" and stops gave no answer: "".
    """
    text = output.strip()
    rationale = ""
    boxed = list(_BOXED.finditer(text))
    if boxed:  # reasoning models box their final answer (\boxed{...}): the last box is the answer
        return clean(boxed[-1].group(1).replace("\\text{", "").replace("}", "")), text[: boxed[-1].start()].strip()
    matches = list(_SO_THE_ANSWER.finditer(text))
    labelled = list(_ANSWER_LABEL.finditer(text))
    if labelled and (not matches or labelled[-1].start() > matches[-1].start()):
        rationale, candidate = text[: labelled[-1].start()].strip(), labelled[-1].group(1)
    elif matches:
        rationale, candidate = text[: matches[-1].start()].strip(), matches[-1].group(1)
    else:
        said = (_RESTATEMENT.sub("", line) for line in text.splitlines())  # a question said back, then an answer
        lines = [line for line in said if line.strip() and not (_RESTATES.search(line) or _asks_back(line))]
        if reasoning:
            rationale, candidate = "\n".join(lines[:-1]), lines[-1] if lines else ""
        else:  # the first line that is more than chatter ("Sure!", "Here is the answer:" on a line of its own)
            candidate = next((line for line in lines if clean(line)), "")
    return clean(candidate), rationale


def clean(candidate: str) -> str:
    """One answer's text without the chatter around it: its first line, an opener ("Sure!"), "The
    answer is" and "Answer:" left-overs, quotes, markdown emphasis and a trailing period."""
    answer = candidate.strip().splitlines()[0] if candidate.strip() else ""
    answer = _OPENER.sub("", _PREAMBLE.sub("", answer))
    answer = _RESTATEMENT.sub("", answer)  # the question said back, then the answer
    # "Answer: The answer is X", and a small model's loop ("The answer to this question is: "The answer
    # to this question is: ...", "The answer is that the answer is that ...") however often it goes round
    looped = False
    while _LEAD.match(answer):
        answer, looped = _LEAD.sub("", answer, count=1), True
    if _CUT_LEAD.match(answer):  # what is left is a lead cut off by the token limit: no answer
        return ""
    if looped and _LOOP_WORDS.startswith(answer.strip(_QUOTES + " .").lower()):  # "... the answer is that the"
        return ""
    if _RESTATES.search(answer) or _asks_back(answer):  # the question said back is no answer
        return ""
    answer = _BECAUSE.sub("", _IT_WOULD_BE.sub("", answer))
    quoted = _QUOTED.match(answer)  # '"Alabama" would have climbed to 19': the quoted name is the answer
    if quoted:
        answer = quoted.group(1)
    answer = answer.strip().strip(_QUOTES).strip()
    answer = re.sub(r"[.。]+$", "", answer).strip().strip(_QUOTES).strip()
    return answer


def majority(answers: Sequence[str]) -> str:
    """The most frequent answer after SQuAD normalization; ties go to the earliest sample."""
    if not answers:
        return ""
    counts = collections.Counter(normalize_answer(a) for a in answers)
    best = max(counts.values())
    return next(a for a in answers if counts[normalize_answer(a)] == best)


_WIQA_LABEL = re.compile(r"\b(more|less|no[\s_-]+effect)\b", re.I)


def for_task(answer: str, rationale: str, task: str, example=None) -> tuple[str, str]:
    """The answer in the task's form: for WIQA one of its labels (the first one named), for a
    multiple-choice question the chosen option as ``B. text``; "" (abstain) where it names none. A
    question without options (one typed into ``ifqa serve``) keeps the model's answer."""
    choices = multiple_choice.options(example) if example is not None else []
    if task == "mc" and choices:
        label = multiple_choice.chosen(answer, choices)
        return (multiple_choice.shown_choice(label, choices) if label else ""), rationale
    if task != "wiqa":
        return answer, rationale
    from ifqa.eval.wiqa import normalize_label  # WIQA's labels, for a WIQA answer alone

    found = _WIQA_LABEL.search(answer)
    return (normalize_label(found.group(1)) if found else ""), rationale


def shown_question(example, task: str) -> str:
    """How a question is written in a prompt: a multiple-choice one with its options below it."""
    shown = multiple_choice.shown_options(example) if task == "mc" else ""
    return f"{example.question}\n{shown}" if shown else example.question


def shown_answer(example, task: str) -> str:
    """How a demonstration's answer is written in a prompt (WIQA's ``no_effect`` as "no effect"; a
    multiple-choice answer as its option's label)."""
    answer = example.answers[0]
    if task == "mc":
        return multiple_choice.gold(example) or answer
    return answer.replace("_", " ") if task == "wiqa" else answer
