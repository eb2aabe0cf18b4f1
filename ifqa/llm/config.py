"""The settings of model access every command that prompts a model shares (``ifqa read llm``, ``ifqa
judge``, ``ifqa serve``): which model, where, how many requests at once, the response cache, and how
a reasoning model thinks. A command's config subclasses ``ModelAccess``, so each option is declared
once and means the same everywhere."""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from typing import ClassVar

from ifqa.configs import flag
from ifqa.errors import IfqaError
from ifqa.llm.protocol import SPECIFIC, Backend, BackendOptions, GenerationParams
from ifqa.llm.trained import default_backend
from ifqa.model_options import ModelOptions
from ifqa.redact import redact_url
from ifqa.registry import LLM_BACKENDS


@dataclass(frozen=True)
class ModelAccess(ModelOptions):
    """``ModelOptions`` and what is made of them: the backend, the response cache, the generation
    parameters. A command's config subclasses it; ``ALSO_USED`` names the options the command reads
    besides the model (``--device`` places retrieval too), so a backend that ignores them is no reason
    to refuse them."""

    ALSO_USED: ClassVar[frozenset[str]] = frozenset()
    PURPOSE: ClassVar[str] = "the model"  # what --model is required for

    @property
    def backend_name(self) -> str:
        """The backend these settings reach: ``--backend``, else llama.cpp for a GGUF file or a ``demo:``
        model, else an OpenAI-compatible endpoint."""
        return self.backend or default_backend(self.model)

    def public(self):
        """This configuration as it may be written down: credentials in the endpoint URL redacted."""
        return replace(self, base_url=redact_url(self.base_url))

    def require_model(self) -> None:
        """The settings that cannot work together, refused before anything is read or contacted."""
        if not self.model:
            raise IfqaError(f"--model is required for {self.PURPOSE}")
        max_tokens = getattr(self, "max_tokens", None)
        if self.thinking_budget is not None:
            if self.thinking == "off":
                raise IfqaError("--thinking-budget is for a model that thinks; drop it or pass --thinking on")
            if max_tokens is not None and self.thinking_budget >= max_tokens:
                raise IfqaError(
                    f"--thinking-budget {self.thinking_budget} leaves no tokens for the answer within --max-tokens "
                    f"{max_tokens}; lower the budget or raise --max-tokens"
                )

    def backend_instance(self, api_key: str | None = None) -> Backend:
        """The backend these settings name (an ``LLM_BACKENDS`` entry made from ``BackendOptions``); a
        thinking budget for a backend that takes none (vLLM's offline engine) is refused before it is made."""
        kind = LLM_BACKENDS.get(self.backend_name)
        ignored = [f for f in fields(ModelOptions) if f.name in SPECIFIC and f.name not in kind.reads | self.ALSO_USED]
        for field in ignored:
            if getattr(self, field.name) != field.default:
                raise IfqaError(
                    f"{flag(field)} {getattr(self, field.name)}: the {self.backend_name} backend does not read it "
                    f"(it reads {', '.join('--' + n.replace('_', '-') for n in sorted(kind.reads)) or 'none of these'}); "
                    "drop it, or name the backend that does with --backend"
                )
        if self.thinking_budget is not None and not kind.takes_thinking_budget:
            raise IfqaError(
                f"the {self.backend_name} backend takes no thinking budget; serve the model (vllm serve) "
                "and read with --backend openai, which sends it, or drop --thinking-budget"
            )
        return kind.from_options(self.model, BackendOptions.from_access(self, api_key))

    def params(self, max_tokens: int, temperature: float, stop: tuple[str, ...], seed: int) -> GenerationParams:
        """What is asked of the model, these settings' reasoning requests included."""
        return GenerationParams(
            max_tokens,
            temperature,
            1.0,
            stop,
            seed,
            thinking=None if self.thinking == "auto" else self.thinking == "on",
            thinking_budget=self.thinking_budget,
            reasoning_effort=self.reasoning_effort,
        )
