"""Model access shared by everything that prompts a model (readers now, query rewriting next):
OpenAI-compatible and local transformers backends (``backends``), a persistent response cache
(``cache``) and cached, counted, concurrent generation (``generation``)."""

from __future__ import annotations


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
    """A backend by name: ``openai`` (any OpenAI-compatible endpoint), ``hf`` (local transformers) or
    ``vllm`` (vLLM's offline engine on the local GPUs)."""
    from ifqa.errors import IfqaError
    from ifqa.llm import backends

    if backend == "hf":
        return backends.HFBackend(model, device, batch_size)
    if backend == "openai":
        return backends.OpenAIBackend(model, base_url, api_key, chat=not completions, timeout=timeout, retries=retries)
    if backend == "vllm":
        from ifqa.llm.vllm_backend import VLLMBackend

        return VLLMBackend(model, chat=False if completions else None)
    raise IfqaError(f"unknown backend {backend!r}; choose openai, hf or vllm")
