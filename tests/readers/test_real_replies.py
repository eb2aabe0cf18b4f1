"""Extraction and verdicts on what a real model wrote: SmolLM2-135M-Instruct's replies to the demo
questions in every reading mode and as a judge (tests/readers/data/smollm2_replies.json, collected by
`ifqa read llm --model demo:smollm2` and `ifqa judge`; each answer reviewed by hand when it was kept).
The chatter small models wrap answers in ("The answer to this question is: X", quotes, a restated
question, a lead repeated until the token limit) never reaches a prediction."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from ifqa.judge.run import parse_verdict
from ifqa.readers.llm.answers import extract

REPLIES = json.loads((Path(__file__).parent / "data" / "smollm2_replies.json").read_text(encoding="utf-8"))
#: What no prediction may begin with (the issue's list of what SmolLM2 left in its predictions).
CHATTER = re.compile(r"^(?:the answer|answer\s*:|final answer|question\s*:|[\"'“*])", re.I)


@pytest.mark.parametrize("row", REPLIES["answers"], ids=lambda r: f"{r['mode']}-{r['question']}")
def test_each_real_reply_gives_its_reviewed_answer(row):
    assert extract(row["reply"], reasoning=row["mode"] == "cot")[0] == row["answer"]


def test_no_answer_begins_with_chatter_though_many_replies_do():
    rows = REPLIES["answers"]
    wrapped = [r for r in rows if CHATTER.match(r["reply"].strip())]
    assert len(wrapped) >= len(rows) // 3  # the corpus holds the shapes this is about
    assert not [r["reply"] for r in rows if CHATTER.match(extract(r["reply"], r["mode"] == "cot")[0])]


@pytest.mark.parametrize("row", REPLIES["verdicts"], ids=lambda r: f"{r['judged']}-{r['question']}")
def test_each_real_judge_reply_gives_its_verdict_or_none(row):
    assert parse_verdict(row["reply"]) == row["verdict"]


def test_the_judge_corpus_holds_lenient_verdicts_and_unclear_replies():
    replies = {r["reply"].strip(): r["verdict"] for r in REPLIES["verdicts"]}
    assert replies.get("The answer is yes.") is True  # once a run-stopping reply
    assert sum(v is None for v in replies.values()) >= 2  # recorded as unclear, the run goes on
