"""The LLM reader's configuration: one dataclass for ``ifqa read llm``, experiment YAML and the
command shown in results (see ``ifqa.configs``). The API key is never part of it."""

from __future__ import annotations

from dataclasses import dataclass

from ifqa.configs import option
from ifqa.errors import IfqaError
from ifqa.registry import LLM_BACKENDS

MODES = ("qa", "cot", "genread", "open", "context")
SAMPLING_TEMPERATURE = 0.7


@dataclass(frozen=True)
class LLMReaderConfig:
    model: str | None = option(None, "Model name on the endpoint, or a local path/hub id with --backend hf.")
    mode: str = option(
        "qa",
        "closed-book (qa), chain-of-thought (cot), GenRead, open-book (retrieved passages) or "
        "context (each question's own: WIQA's procedure, CausalQA's passage, IfQA's gold passages).",
        choices=MODES,
    )
    cot: bool = option(False, "Add chain-of-thought to open, genread and context.")
    backend: str = option(
        "openai",
        "OpenAI-compatible endpoint, local transformers, or vLLM's offline engine on local GPUs.",
        choices=LLM_BACKENDS,
    )
    base_url: str | None = option(
        None, "Endpoint (vLLM, llama.cpp, Ollama...); default OpenAI.", envvar="OPENAI_BASE_URL"
    )
    completions: bool = option(False, "Use the completions API instead of chat.")
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
    max_tokens: int | None = option(None, "Tokens to generate (default 32, or 256 with reasoning).", min=1)
    max_prompt_tokens: int | None = option(
        None, "Prompt budget (default: the model's window minus --max-tokens; 4096 if unknown).", min=1
    )
    concurrency: int = option(4, "Requests in flight.", min=1)
    timeout: float = option(60.0, "Seconds to wait for one response before retrying.", min=0.1)
    retries: int = option(6, "Retries of a request after a rate limit, server error or timeout.", min=0)
    batch_size: int = option(8, "Local models: questions per generation batch.", min=1)
    cache: str | None = option(None, "Response cache (default <ifqa cache>/llm-cache.sqlite).")
    no_cache: bool = option(False, "Do not read or write the response cache.")
    prompts_dir: str | None = option(None, "Templates folder (default: the installed prompts).")
    device: str | None = option(None, "Local models: cpu, cuda ... (default: GPU when present).")

    @property
    def effective_temperature(self) -> float:
        """What is sent: the given temperature, else 0 for one sample and 0.7 to vote over several."""
        if self.temperature is not None:
            return self.temperature
        return SAMPLING_TEMPERATURE if self.samples > 1 else 0.0

    @property
    def reasoning(self) -> bool:
        return self.mode == "cot" or (self.cot and self.mode in ("open", "genread", "context"))

    def output_name(self, label: str) -> str:
        """Default predictions file name: the questions, the mode and the model."""
        model = (self.model or "model").rstrip("/").replace("/", "_").replace(":", "_")
        return f"{label}-llm-{self.mode}{'-cot' if self.cot and self.mode in ('open', 'genread', 'context') else ''}-{model}.jsonl"

    def public(self) -> LLMReaderConfig:
        """This configuration as it may be written down: credentials in the endpoint URL redacted."""
        from dataclasses import replace

        from ifqa.redact import redact_url

        return replace(self, base_url=redact_url(self.base_url))

    def require_model(self) -> None:
        if not self.model:
            raise IfqaError("--model is required for the LLM reader")
