"""Model access shared by everything that prompts a model (readers now, query rewriting next):
OpenAI-compatible and local transformers backends (``backends``), a persistent response cache
(``cache``) and cached, counted, concurrent generation (``generation``)."""

from __future__ import annotations

from dataclasses import dataclass

from ifqa.registry import LLM_BACKENDS


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


def make_backend(
    backend: str,
    model: str,
    base_url: str | None = None,
    api_key: str | None = None,
    completions: bool = False,
    device: str | None = None,
    batch_size: int = 8,
    timeout: float = 60.0,
    retries: int = 6,
):
    """A backend by its name in ``LLM_BACKENDS``: ``openai`` (any OpenAI-compatible endpoint), ``hf``
    (local transformers), ``vllm`` (vLLM's offline engine on the local GPUs), or one registered there."""

    options = BackendOptions(base_url, api_key, completions, device, batch_size, timeout, retries)
    return LLM_BACKENDS.get(backend).from_options(model, options)
