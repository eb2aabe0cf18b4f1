"""LLM query formulations: ``rewrite`` asks a model for factual search queries behind the
counterfactual question; ``hyde`` asks it to write the encyclopedia passage that would hold the
facts (Gao et al., 2023, "HyDE"). Either way the cleaned question is kept as one more sub-query,
and all are searched and fused, so a poor rewrite cannot lose what the question alone finds.

Model access is ``ifqa.llm``: any OpenAI-compatible endpoint (``--rewrite-model``,
``--rewrite-base-url``; key from $OPENAI_API_KEY) or a local transformers model
(``--rewrite-backend hf``), through the persistent response cache, so a rerun costs nothing.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

from ifqa.errors import IfqaError
from ifqa.llm import make_backend
from ifqa.llm.backends import GenerationParams
from ifqa.llm.cache import ResponseCache
from ifqa.llm.generation import CachedGenerator, Counters
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
        if not config.rewrite_model:
            raise IfqaError(
                f"query mode {self.mode!r} needs a model: --rewrite-model NAME (and --rewrite-base-url "
                "for an OpenAI-compatible server)"
            )
        backend = make_backend(
            config.rewrite_backend,
            config.rewrite_model,
            config.rewrite_base_url,
            os.environ.get("OPENAI_API_KEY"),
            device=config.device,
        )
        counters = Counters()
        generate = CachedGenerator(backend, ResponseCache(config.rewrite_cache), 8, counters)
        params = GenerationParams(max_tokens=MAX_TOKENS[self.mode], temperature=0.0)
        template = PROMPTS[self.mode]

        def formulate(questions: Sequence[str]) -> list[list[str]]:
            completions = generate([template.format(question=q) for q in questions], [params] * len(questions))
            return [[clean_cues(q)] + self.parse(c.text) for q, c in zip(questions, completions)]

        formulate.counters = counters  # type: ignore[attr-defined]
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
