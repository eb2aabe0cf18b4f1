"""A counterfactual question's factual twin: the question without its premise, in the factual tense
("If Los Angeles was on the east coast of the U.S., what would be the time difference between Los
Angeles and Paris?" -> "What is the time difference between Los Angeles and Paris?"), by a rule (rough
English where the premise holds a comma or the verb is irregular, hence ``llm_twins``) or from a file."""

from __future__ import annotations

import re
from pathlib import Path

from ifqa.artifacts import Example, QuestionSet
from ifqa.errors import IfqaError
from ifqa.io import read_jsonl
from ifqa.retrieval.queries import split_premise

#: The conditional of the main clause and its indicative, tried in order (the first that matches is
#: used); SUBJECT is the few words between "would" and its verb ("would Lincoln have been").
_SUBJECT = r"((?:[^\s,?]+ ){1,6}?)"
_TENSES = [
    (r"\bwould there (?:still )?be\b", "are there"),
    (r"\bwould not have been\b", "was not"),
    (r"\bwould (?:still )?have been\b", "was"),
    (rf"\bwould {_SUBJECT}have been\b", r"was \1"),
    (r"\bwould (?:still )?be\b", "is"),
    (rf"\bwould {_SUBJECT}be\b", r"is \1"),
    (r"\bwould (?:still )?have (\w+)", r"\1"),
    (rf"\bwould {_SUBJECT}have (\w+)", r"had \1\2"),
    (r"\bwould (?:still )?(\w+)", r"does \1"),
]


def rule_twin(question: str) -> str:
    """The factual twin by rule; a question with no premise is its own twin."""
    premise, main = split_premise(question)
    if not premise:
        return question
    for pattern, replacement in _TENSES:
        if re.search(pattern, main, flags=re.I):
            main = re.sub(pattern, replacement, main, count=1, flags=re.I)
            break
    main = re.sub(r"\s+([?.,!])", r"\1", " ".join(main.split()))
    return main[:1].upper() + main[1:]


def twins_from_file(questions: QuestionSet, path: str | Path) -> QuestionSet:
    """Twins read from ``{"qid", "question"}`` lines: one for every question of the set, no other."""
    found: dict[str, str] = {}
    for number, record in read_jsonl(path):
        if not isinstance(record, dict) or not isinstance(record.get("question"), str) or "qid" not in record:
            raise IfqaError("each line needs 'qid' and a string 'question' (the factual twin)", path, number)
        if not record["question"].strip():
            raise IfqaError(f"the twin of qid {record['qid']!r} is empty", path, number)
        if str(record["qid"]) in found:
            raise IfqaError(f"qid {record['qid']!r} has a twin twice (each question has one)", path, number)
        found[str(record["qid"])] = record["question"]
    qids = {e.qid for e in questions.examples}
    missing, extra = sorted(qids - set(found)), sorted(set(found) - qids)
    if missing or extra:
        what = f"no twin for qid {missing[0]!r}" if missing else f"qid {extra[0]!r} is not in {questions.name}"
        raise IfqaError(
            f"the twins do not match the questions of {questions.name} ({what}; {len(missing)} missing, "
            f"{len(extra)} unknown)",
            path,
        )
    return twin_set(questions, found, "file")


def twin_set(questions: QuestionSet, twins: dict[str, str], how: str) -> QuestionSet:
    """The questions with their twins in place (answers, contexts and metadata kept)."""
    examples = [Example(e.qid, twins[e.qid], e.answers, e.context, e.meta) for e in questions.examples]
    return QuestionSet(f"{questions.name}:twins-{how}", examples, questions.task)
