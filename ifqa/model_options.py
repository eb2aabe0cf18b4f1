"""The model options every command that prompts a model takes (``ifqa read llm``, ``ifqa judge``,
``ifqa serve``, the twins of ``ifqa analyze premise``, query rewriting's ``--rewrite-...``): which model,
where, how many requests at once, the response cache, and how a reasoning model thinks. Declarations
only (``llm/config.ModelAccess`` adds what uses them), so a command that only retrieves reads them
without importing any model code."""

from __future__ import annotations

from dataclasses import dataclass

from ifqa.configs import option
from ifqa.registry import LLM_BACKENDS

EFFORTS = ("none", "minimal", "low", "medium", "high", "xhigh")
THINKING_CHOICES = ("auto", "on", "off")
#: The defaults several places read, written once (the backends' own defaults are these).
BATCH_SIZE = 8  # local models: prompts generated together
TIMEOUT = 60.0  # seconds an endpoint has to answer one request
RETRIES = 6  # retries of a request after a rate limit, a server error or a timeout


@dataclass(frozen=True)
class ModelOptions:
    """The settings of model access; each option is declared once and means the same everywhere.
    ``OPERATIONAL``: those that change how answers are fetched, never which answers come back."""

    OPERATIONAL = (
        "base_url",
        "concurrency",
        "timeout",
        "retries",
        "cache",
        "no_cache",
        "device",
        "model_threads",
        "batch_size",
    )

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
    timeout: float = option(TIMEOUT, "Seconds to wait for one response before retrying.", min=0.1)
    retries: int = option(RETRIES, "Retries of a request after a rate limit, server error or timeout.", min=0)
    batch_size: int = option(BATCH_SIZE, "Local models: questions per generation batch.", min=1)
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
