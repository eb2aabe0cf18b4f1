"""Query formulation: what is searched for a question (a list of sub-queries, fused when several).

``question`` searches the question as it is (the default, and the paper's setting); ``premise``
and ``main-clause`` search one side of "If X, what would Y be?", split at the first comma after a
leading "If". New formulations are one function and one line in ``ifqa.registry.QUERY_MODES``.
"""

from __future__ import annotations


def split_premise(question: str) -> tuple[str, str]:
    """("If X", "what would Y be?") at the first comma after a leading "If"; ("", question) otherwise."""
    if question.lower().startswith("if ") and "," in question:
        premise, main = question.split(",", 1)
        return premise.strip(), main.strip()
    return "", question


def whole_question(question: str) -> list[str]:
    return [question]


def premise_only(question: str) -> list[str]:
    """The counterfactual premise ("If X ..."), or the whole question when it has none."""
    return [split_premise(question)[0] or question]


def main_clause(question: str) -> list[str]:
    """What is asked ("what would Y be?"), without the premise."""
    return [split_premise(question)[1]]
