"""Query formulation: what is searched for a question (a list of sub-queries, fused when several).

``question`` searches the question as it is (the default, and the paper's setting); ``premise``
and ``main-clause`` search one side of "If X, what would Y be?", split at the first comma after a
leading "If". ``clean`` drops the words that make a question counterfactual ("if", "had",
"would", "not", ...): they describe no fact in the collection, and in BM25 they only add noise
(the frequent ones weigh little, the rarer ones such as "hypothetically" mislead). ``split``
searches the cleaned premise and the cleaned main clause as two sub-queries, fused. The LLM
formulations (``rewrite``, ``hyde``) live in ``ifqa.retrieval.rewrite``. New formulations are one
function and one line in ``ifqa.registry.QUERY_MODES``.
"""

from __future__ import annotations

import re

#: Words that mark the counterfactual or hypothetical frame rather than a fact to be found.
CUE_WORDS = frozenset(
    """
if had have has would could should might will shall were was not no never instead suppose supposing
imagine imagining hypothetically hypothetical assume assuming what which who whom whose when where
how many much be been being become became happen happened still did does do
""".split()
)

_WORD = re.compile(r"[\w'’.-]+|[^\w\s]")


def split_premise(question: str) -> tuple[str, str]:
    """("If X", "what would Y be?") at the first comma after a leading "If"; ("", question) otherwise."""
    if question.lower().startswith("if ") and "," in question:
        premise, main = question.split(",", 1)
        return premise.strip(), main.strip()
    return "", question


def clean_cues(text: str) -> str:
    """``text`` without counterfactual cue words and n't contractions; unchanged if nothing would remain."""
    kept = []
    for word in _WORD.findall(text):
        bare = word.lower().strip(".'’-")
        if bare in CUE_WORDS or bare.endswith(("n't", "n’t")) or not re.search(r"\w", word):
            continue
        kept.append(word.rstrip("."))
    return " ".join(kept) or text


def whole_question(question: str) -> list[str]:
    return [question]


def premise_only(question: str) -> list[str]:
    """The counterfactual premise ("If X ..."), or the whole question when it has none."""
    return [split_premise(question)[0] or question]


def main_clause(question: str) -> list[str]:
    """What is asked ("what would Y be?"), without the premise."""
    return [split_premise(question)[1]]


def cleaned(question: str) -> list[str]:
    """The question without its counterfactual cue words."""
    return [clean_cues(question)]


def premise_and_main(question: str) -> list[str]:
    """The cleaned question, premise and main clause, searched apart and fused (one query without a premise).

    The cleaned question stays among the lists: fused alone, the main clause (which names no entity
    in most IfQA questions) outvotes the premise at rank 1 (measured in docs/results.md).
    """
    premise, main = split_premise(question)
    if not premise:
        return cleaned(question)
    return [clean_cues(question), clean_cues(premise), clean_cues(main)]
