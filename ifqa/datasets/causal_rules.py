"""The seven lexical rules of Webis-CausalQA-22 (Bondarenko et al., COLING 2022, Table 3).

The corpus was extracted from ten QA datasets by these high-precision rules; they are reused here
to tell which questions of any set (IfQA's, a user's) are causal and by which rule. Each rule is a
set of alternatives matched as whole words, case-insensitively; R6 and R7 need two parts (the
paper's ``^``): a "what (will|might) happen(s)" / "what to do | should be done" phrase and a
condition word elsewhere in the question. A question is assigned the first rule that fires, as the paper's per-rule counts
add up to its corpus size; ``matching_rules`` lists every rule that fires.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Rule:
    name: str
    parts: tuple[re.Pattern, ...]  # all must match
    example: str  # the paper's example question for the rule

    def matches(self, question: str) -> bool:
        """Every part matches; each later part outside the text the earlier ones matched (so the
        "to" of "what to do" is not R7's condition word)."""
        rest = question
        for part in self.parts:
            found = part.search(rest)
            if not found:
                return False
            rest = rest[: found.start()] + " " + rest[found.end() :]
        return True


def _words(pattern: str) -> re.Pattern:
    return re.compile(rf"\b(?:{pattern})\b", re.IGNORECASE)


RULES: tuple[Rule, ...] = (
    Rule("R1", (_words("why"),), "Why does a mosquito bite itch?"),
    Rule("R2", (_words(r"causes?"),), "What causes broken blood vessels?"),
    Rule("R3", (_words(r"how\s+come|how\s+did"),), "How did the constellation Bootes get its name?"),
    Rule("R4", (_words(r"effects?|affects?"),), "What was the effect of the silk road on religions?"),
    Rule("R5", (_words(r"leads?\s+to"),), "What does increasing water vapor lead to?"),
    Rule(
        "R6",
        (_words(r"what\s+(?:will\s+|might\s+)?happens?"), _words("if|when")),
        "What happens if we drink very hot water?",
    ),
    Rule(
        "R7",
        (_words(r"what\s+(?:to\s+do|should\s+be\s+done)"), _words("if|to|when")),
        "What to do if my Xbox won't connect to the Wi-Fi?",
    ),
)


def matching_rules(question: str) -> list[str]:
    """Every rule that fires on the question, in the paper's order."""
    return [rule.name for rule in RULES if rule.matches(question)]


def causal_rule(question: str) -> str | None:
    """The rule that makes the question causal (the first that fires), or None."""
    return next((rule.name for rule in RULES if rule.matches(question)), None)


def rule_counts(questions: Iterable[str]) -> dict[str, int]:
    """Questions per assigned rule (R1..R7, then ``none``), over any iterable of questions."""
    counts = Counter(causal_rule(question) or "none" for question in questions)
    return {name: counts.get(name, 0) for name in [rule.name for rule in RULES] + ["none"]}


def summarize(questions: Sequence[str]) -> dict:
    """Counts and shares per rule, and the share of causal questions."""
    counts = rule_counts(questions)
    n = len(questions)
    causal = n - counts["none"]
    return {
        "n": n,
        "causal": causal,
        "causal_share": round(100 * causal / n, 2) if n else 0.0,
        "by_rule": {
            name: {"n": count, "share": round(100 * count / n, 2) if n else 0.0} for name, count in counts.items()
        },
    }
