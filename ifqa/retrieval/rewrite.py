"""LLM query formulations: ``rewrite`` asks a model for factual search queries behind the
counterfactual question; ``hyde`` asks it to write the encyclopedia passage that would hold the
facts (Gao et al., 2023, "HyDE"). Either way the cleaned question is kept as one more sub-query,
and all are searched and fused, so a poor rewrite cannot lose what the question alone finds.

The model is a ``ModelSession`` with every model option as ``--rewrite-...`` (``config.RewriteAccess``),
as for every command that prompts; its record goes into the run's manifest (``pipeline.describe``).
"""

from __future__ import annotations

import os
from collections.abc import Sequence

from ifqa.configs import flags_prefixed, unprefixed
from ifqa.llm.config import ModelAccess
from ifqa.llm.session import Ask, ModelSession
from ifqa.retrieval.queries import clean_cues

PROMPTS = {
    "rewrite": (
        "The question below assumes something that did not happen. Write up to three short search queries "
        "for the real-world facts needed to answer it (entities, dates, places), one per line, nothing else.\n\n"
        "Question: {question}\nQueries:\n"
    ),
    "hyde": (
        "Write one short Wikipedia-style paragraph stating the real-world facts that the question below "
        "builds on (ignore its hypothetical premise's outcome).\n\nQuestion: {question}\nParagraph:\n"
    ),
}
MAX_TOKENS = {"rewrite": 64, "hyde": 160}


class LLMFormulation:
    """A query mode that needs a model; the pipeline calls ``for_config`` once, then the result per batch."""

    def __init__(self, mode: str):
        self.mode = mode

    def for_config(self, config):
        with flags_prefixed(ModelAccess, "rewrite_"):  # a refusal names --rewrite-dtype, not --dtype
            session = ModelSession.open(unprefixed(config, "rewrite_", ModelAccess), os.environ.get("OPENAI_API_KEY"))
        ask = Ask(session.max_tokens(MAX_TOKENS[self.mode]))
        template = PROMPTS[self.mode]

        def formulate(questions: Sequence[str]) -> list[list[str]]:
            replies = session.ask([template.format(question=q) for q in questions], ask)
            # a reasoning model's thinking is split off by the session: only its answer holds queries
            return [[clean_cues(q)] + self.parse(r.answer) for q, r in zip(questions, replies)]

        formulate.session = session  # type: ignore[attr-defined]  # what the run's manifest records of it
        return formulate

    def parse(self, text: str) -> list[str]:
        """Sub-queries from a completion: one per line for ``rewrite``, the paragraph for ``hyde``."""
        if self.mode == "hyde":
            text = " ".join(text.split())
            return [text] if text else []
        lines = [line.strip().lstrip("-*0123456789.) ").strip() for line in text.splitlines()]
        return [line for line in lines if line][:3]


rewrite = LLMFormulation("rewrite")
hyde = LLMFormulation("hyde")
