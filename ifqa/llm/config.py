"""The settings of model access every command that prompts a model shares (``ifqa read llm``, ``ifqa
judge``, ``ifqa serve``): which model, where, how many requests at once, the response cache, and how
a reasoning model thinks. A command's config subclasses ``ModelAccess``, so each option is declared
once and means the same everywhere."""

from __future__ import annotations

from dataclasses import dataclass, replace

from ifqa.configs import option
from ifqa.errors import IfqaError
from ifqa.llm import BackendOptions, thinking
from ifqa.llm.backends import GenerationParams
from ifqa.llm.cache import ResponseCache
from ifqa.llm.local_models import default_backend
from ifqa.llm.thinking import THINKING_CHOICES
from ifqa.redact import redact_url
from ifqa.registry import LLM_BACKENDS

EFFORTS = ("none", "minimal", "low", "medium", "high", "xhigh")


@dataclass(frozen=True)
class ModelAccess:
    model: str | None = option(
        None,
        "Model name on the endpoint, a GGUF file or demo:smollm2 (llama.cpp), or a local path/hub id with --backend hf.",
    )
    backend: str | None = option(
        None,
        "OpenAI-compatible endpoint, llama.cpp in this process (GGUF files), local transformers, or vLLM's offline "
        "engine on local GPUs (default: llamacpp for a .gguf file or a demo: model, else openai).",
        choices=LLM_BACKENDS,
    )
    base_url: str | None = option(
        None, "Endpoint (vLLM, llama.cpp, Ollama...); default OpenAI.", envvar="OPENAI_BASE_URL"
    )
    completions: bool = option(False, "Use the completions API instead of chat.")
    thinking: str = option(
        "auto",
        "Does the model think before answering (<think> blocks, a reasoning field)? auto: a reasoning model's name "
        "(R1, QwQ, Qwen3, o-series, GPT-5 ...) or a local chat template that thinks; on/off also set the chat "
        "template's thinking switch (enable_thinking).",
        choices=THINKING_CHOICES,
    )
    thinking_budget: int | None = option(
        None,
        "Tokens of thinking: sent to the endpoint (vLLM, llama.cpp), enforced on local transformers models.",
        min=0,
    )
    reasoning_effort: str | None = option(
        None, "reasoning_effort for models that take it (OpenAI's reasoning models, gpt-oss).", choices=EFFORTS
    )
    concurrency: int = option(4, "Requests in flight.", min=1)
    timeout: float = option(60.0, "Seconds to wait for one response before retrying.", min=0.1)
    retries: int = option(6, "Retries of a request after a rate limit, server error or timeout.", min=0)
    batch_size: int = option(8, "Local models: questions per generation batch.", min=1)
    cache: str | None = option(None, "Response cache (default <ifqa cache>/llm-cache.sqlite).")
    no_cache: bool = option(False, "Do not read or write the response cache.")
    device: str | None = option(None, "Local models: cpu, cuda ... (default: GPU when present).")
    model_threads: int | None = option(None, "llama.cpp: CPU threads (default: every core).", min=1)
    context_window: int | None = option(
        None,
        "llama.cpp and vLLM: tokens of context to hold (default: the model's, at most 16,384 on llama.cpp).",
        min=64,
    )
    gguf_weights: str = option(
        "auto",
        "llama.cpp: a quantized file's weights as stored (file), or as an F16 copy made once in the ifqa cache (f16: "
        "about 2x faster prompt reading on x86 for types without a fast matrix kernel, such as Q4_1 and the K "
        "quants); auto: f16 for such a file whose copy is at most 2 GB (demo:smollm2: 270 MB).",
        choices=("auto", "file", "f16"),
    )
    dtype: str = option(
        "auto",
        "Local transformers models: the weights' precision. auto: bfloat16 on a GPU and on a CPU with AMX (torch "
        "multiplies bfloat16 on its tiles, about 3x float32), float32 on other CPUs.",
        choices=("auto", "float32", "bfloat16", "float16"),
    )

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
            raise IfqaError(f"--model is required for {self.purpose()}")
        max_tokens = getattr(self, "max_tokens", None)
        if self.thinking_budget is not None:
            if self.thinking == "off":
                raise IfqaError("--thinking-budget is for a model that thinks; drop it or pass --thinking on")
            if max_tokens is not None and self.thinking_budget >= max_tokens:
                raise IfqaError(
                    f"--thinking-budget {self.thinking_budget} leaves no tokens for the answer within --max-tokens "
                    f"{max_tokens}; lower the budget or raise --max-tokens"
                )

    def purpose(self) -> str:
        return "the model"

    def backend_instance(self, api_key: str | None = None):
        """The backend these settings name (an ``LLM_BACKENDS`` entry made from ``BackendOptions``); a
        thinking budget for a backend that takes none (vLLM's offline engine) is refused here, where the
        two meet."""
        options = BackendOptions(
            self.base_url,
            api_key,
            self.completions,
            self.device,
            self.batch_size,
            self.timeout,
            self.retries,
            self.model_threads,
            self.context_window,
            self.gguf_weights,
            self.dtype,
        )
        backend = LLM_BACKENDS.get(self.backend_name).from_options(self.model, options)
        if self.thinking_budget is not None and not getattr(backend, "takes_thinking_budget", True):
            raise IfqaError(
                f"the {backend.describe()['backend']} backend takes no thinking budget; serve the model (vllm serve) "
                "and read with --backend openai, which sends it, or drop --thinking-budget"
            )
        return backend

    def response_cache(self) -> ResponseCache | None:
        return None if self.no_cache else ResponseCache(self.cache)

    def thinks(self, backend) -> bool:
        """Whether the backend's model thinks first (``thinking.resolve`` on its name and chat template)."""
        template = getattr(backend, "template_thinks", lambda: False)()
        asked = self.thinking_budget is not None or self.reasoning_effort is not None
        return thinking.resolve(self.thinking, backend.describe().get("model"), template, asked)

    def thinking_max_tokens(self) -> int:
        """A thinking model's default token limit: the reasoning default, or the budget plus room to answer."""
        if self.thinking_budget is None:
            return thinking.REASONING_MAX_TOKENS
        return max(thinking.REASONING_MAX_TOKENS, self.thinking_budget + thinking.ANSWER_ROOM)

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
