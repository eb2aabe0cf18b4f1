"""The LLM reader's configuration: one dataclass for ``ifqa read llm``, experiment YAML and the
command shown in results (see ``ifqa.configs``). The API key is never part of it."""

from __future__ import annotations

from dataclasses import dataclass, field

from ifqa.configs import option
from ifqa.llm.config import ModelAccess
from ifqa.llm.thinking import REASONING_MAX_TOKENS

MODES = ("qa", "cot", "genread", "open", "context")
SAMPLING_TEMPERATURE = 0.7


@dataclass(frozen=True)
class LLMReaderConfig(ModelAccess):
    PURPOSE = "the LLM reader"

    mode: str = option(
        "qa",
        "closed-book (qa), chain-of-thought (cot), GenRead, open-book (retrieved passages) or "
        "context (each question's own: WIQA's procedure, CausalQA's passage, IfQA's gold passages).",
        choices=MODES,
    )
    cot: bool = option(False, "Add chain-of-thought to open, genread and context.")
    passages: int = option(5, "Open mode: top passages of the run in the prompt.", min=1)
    demos: int = option(4, "In-context demonstrations.", min=0)
    selection: str = option(
        "random",
        "How demonstrations are chosen: seeded random, or BM25-similar questions.",
        choices=("random", "similar"),
        flag="--demo-selection",
    )
    train: str | None = option(None, "Demonstration pool: a question file (default: the setting's train split).")
    seed: int = option(0, "Seed for demonstration choice and sampling.")
    samples: int = option(1, "Self-consistency samples (majority vote).", min=1)
    temperature: float | None = option(
        None, f"Sampling temperature (default 0, or {SAMPLING_TEMPERATURE} with --samples > 1).", min=0.0
    )
    max_tokens: int | None = option(
        None,
        f"Tokens to generate (default 32, or 256 with chain-of-thought; {REASONING_MAX_TOKENS} for a model that "
        "thinks, or --thinking-budget plus 1024).",
        min=1,
    )
    max_prompt_tokens: int | None = option(
        None, "Prompt budget (default: the model's window minus --max-tokens; 4096 if unknown).", min=1
    )
    prompts_dir: str | None = option(None, "Templates folder (default: the installed prompts).")
    template: str | None = option(
        None,
        "Template to read with: a file name in the templates folder without .txt (default: the mode's own; "
        "factual_qa asks a question without the counterfactual instruction, as the premise analysis asks twins).",
    )

    #: read a model ``ifqa train llm`` made with the settings its card holds (``readers/llm/trained.py``);
    #: off where a caller asks for another prompt on purpose (the premise analysis's closed-book twins)
    follow_card: bool = field(default=True, metadata={"internal": True})
    #: the options given, at their default or not (``configs.from_options`` records them): a card fills the others
    given: tuple[str, ...] = field(default=(), compare=False, metadata={"internal": True})

    @property
    def effective_temperature(self) -> float:
        """What is sent: the given temperature, else 0 for one sample and 0.7 to vote over several."""
        if self.temperature is not None:
            return self.temperature
        return SAMPLING_TEMPERATURE if self.samples > 1 else 0.0

    def output_name(self, label: str) -> str:
        """Default predictions file name: the questions, the mode and the model."""
        model = (self.model or "model").rstrip("/").replace("/", "_").replace(":", "_")
        return f"{label}-llm-{self.mode}{'-cot' if self.cot and self.mode in ('open', 'genread', 'context') else ''}-{model}.jsonl"


@dataclass(frozen=True)
class SharedDeviceReaderConfig(LLMReaderConfig):
    """An LLM reader whose ``--device`` also places retrieval and reranking: ``ifqa serve``'s, and the
    iterative reader's settings read back from its predictions (the premise analysis's twin model). A
    backend that reads no device is then no reason to refuse it."""

    ALSO_USED = frozenset({"device"})
