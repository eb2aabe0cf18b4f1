"""Model access shared by everything that prompts a model (readers, the judge, the twins, query
rewriting, ``ifqa serve``): the backends (``backends``: OpenAI-compatible and local transformers;
``vllm_backend``; ``llamacpp_backend``), a persistent response cache (``cache``), cached, counted,
concurrent generation (``generation``), the settings every prompting command shares (``config``) and
the one session they all prompt through (``session``)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class BackendOptions:
    """What any backend may read of a command's settings (each takes the ones it uses)."""

    base_url: str | None = None
    api_key: str | None = None
    completions: bool = False
    device: str | None = None
    batch_size: int = 8
    timeout: float = 60.0
    retries: int = 6
    threads: int | None = None  # local models on the CPU (llama.cpp): threads; None: every core
    context_window: int | None = None  # llama.cpp: tokens of context to allocate; None: the file's
    gguf_weights: str = "auto"  # llama.cpp: a quantized file's weights as stored, or an F16 working copy
    dtype: str = "auto"  # transformers: the weights' precision; auto: bfloat16 on a GPU or an AMX CPU, else float32
