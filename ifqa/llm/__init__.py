"""Model access shared by everything that prompts a model (readers now, query rewriting next):
OpenAI-compatible and local transformers backends (``backends``), a persistent response cache
(``cache``) and cached, counted, concurrent generation (``generation``)."""

from __future__ import annotations


def make_backend(backend: str, model: str, base_url: str | None = None, api_key: str | None = None,
                 completions: bool = False, device: str | None = None, batch_size: int = 8,
                 timeout: float = 60.0, retries: int = 6):
    """A backend by name: ``openai`` (any OpenAI-compatible endpoint) or ``hf`` (local transformers)."""
    from ifqa.errors import IfqaError
    from ifqa.llm import backends

    if backend == "hf":
        return backends.HFBackend(model, device, batch_size)
    if backend == "openai":
        return backends.OpenAIBackend(model, base_url, api_key, chat=not completions, timeout=timeout, retries=retries)
    raise IfqaError(f"unknown backend {backend!r}; choose openai or hf")
