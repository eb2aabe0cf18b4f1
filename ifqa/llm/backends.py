"""Where completions come from: any OpenAI-compatible endpoint, or a local transformers model.

Both answer ``complete(prompts, params) -> [Completion]``. The OpenAI backend retries 429s, 5xx,
timeouts, dropped connections and malformed responses with exponential backoff; it never logs
or returns the API key.
"""

from __future__ import annotations

import contextlib
import importlib.util
import logging
import random
from collections.abc import Sequence
from dataclasses import dataclass
from unittest import mock

from ifqa.devices import pick_device
from ifqa.errors import IfqaError
from ifqa.io import unpaired_surrogate
from ifqa.llm.local_models import is_local_file_model, model_file
from ifqa.llm.local_thinking import ThinkingBudget, chat_prompt, template_thinks
from ifqa.llm.thinking import openai_reasoning_model, opened_tag
from ifqa.models import check_model_location, loading
from ifqa.redact import add_secret, add_url_secrets, redact, redact_url  # noqa: F401 (redact_url: imported from here elsewhere)

log = logging.getLogger(__name__)


@dataclass
class Completion:
    """What a model sent: its text (inline thinking included), a separate reasoning field's text, why
    it stopped (``length``: the token limit) and its token counts (reasoning tokens counted apart)."""

    text: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    retries: int = 0  # failed attempts before this answer (429, 5xx, timeouts, malformed replies)
    reasoning: str = ""
    finish_reason: str | None = None
    reasoning_tokens: int = 0


@dataclass(frozen=True)
class GenerationParams:
    """What is asked of the model. The reasoning settings go into a request (and the cache key) only
    when set, so that a plain model's requests and cached answers are what they always were."""

    max_tokens: int = 64
    temperature: float = 0.0
    top_p: float = 1.0
    stop: tuple[str, ...] = ()
    seed: int = 0
    thinking: bool | None = None  # ask the chat template to think (True) or not (False); None: ask nothing
    thinking_budget: int | None = None  # tokens of thinking, where the endpoint or backend takes a budget
    reasoning_effort: str | None = None  # OpenAI's reasoning_effort (low, medium, high ...)

    def as_dict(self) -> dict:
        params = {
            "max_tokens": self.max_tokens,
            "temperature": self.temperature,
            "top_p": self.top_p,
            "stop": list(self.stop),
            "seed": self.seed,
        }
        for name in ("thinking", "thinking_budget", "reasoning_effort"):
            if getattr(self, name) is not None:
                params[name] = getattr(self, name)
        return params

    def template_kwargs(self) -> dict:
        """The chat template's thinking switch (Qwen3's ``enable_thinking``), when one is asked for."""
        return {} if self.thinking is None else {"enable_thinking": self.thinking}


class TransientError(Exception):
    """A failure worth retrying (rate limit, server error, timeout, malformed response)."""


class OpenAIBackend:
    """Chat or completions on any OpenAI-compatible server (OpenAI, vLLM, llama.cpp, Ollama)."""

    @classmethod
    def from_options(cls, model: str, options) -> OpenAIBackend:
        return cls(
            model,
            options.base_url,
            options.api_key,
            chat=not options.completions,
            timeout=options.timeout,
            retries=options.retries,
        )

    def __init__(
        self,
        model: str,
        base_url: str | None = None,
        api_key: str | None = None,
        chat: bool = True,
        timeout: float = 60.0,
        retries: int = 6,
        backoff: float = 1.0,
    ):
        import os
        import threading

        import openai

        self.model, self.chat, self.retries, self.backoff = model, chat, retries, backoff
        self.stopping = threading.Event()  # set by the caller's concurrency on its way out (generation.concurrently)
        key = api_key or os.environ.get("OPENAI_API_KEY") or ("EMPTY" if base_url else None)
        if key is None:
            raise IfqaError("no API key: pass --api-key or set OPENAI_API_KEY (or --base-url for a local server)")
        self._url = base_url or "https://api.openai.com/v1"
        self.base_url = redact_url(self._url)  # what logs, errors and manifests show
        from urllib.parse import parse_qsl, urlsplit, urlunsplit

        add_secret(key if key != "EMPTY" else None)
        bad = next((c for c in key if not c.isprintable() or c.isspace()), None)
        if bad is not None:  # a key read from a file saved with CRLF: httpx refuses the header as a "connection error"
            raise IfqaError(
                f"the API key holds {bad!r} (a key file saved with Windows line endings?); remove it from "
                "--api-key or OPENAI_API_KEY"
            )
        add_url_secrets(self._url)  # an experiment's or a library caller's URL, not only the command line's
        parts = urlsplit(self._url)  # a query (?api-version=..., ?api-key=...) goes on every request, not into the path
        if parts.scheme not in ("http", "https") or not parts.netloc:  # "URL", "localhost:8000/v1": no request can go
            raise IfqaError(f"--base-url {self.base_url!r} is not a URL; give one like http://localhost:8000/v1")
        self._client = openai.OpenAI(
            base_url=urlunsplit(parts._replace(query="")),
            api_key=key,
            timeout=timeout,
            max_retries=0,
            default_query=dict(parse_qsl(parts.query)) or None,
        )
        self._openai = openai

    def describe(self) -> dict:
        return {"backend": "openai", "model": self.model, "base_url": self.base_url, "chat": self.chat}

    def complete(self, prompts: Sequence[str], params: GenerationParams) -> list[Completion]:
        return [self._complete_one(prompt, params) for prompt in prompts]

    def _complete_one(self, prompt: str, params: GenerationParams) -> Completion:
        for attempt in range(self.retries + 1):
            try:
                completion = self._request(prompt, params)
                completion.retries = attempt
                return completion
            except TransientError as exc:
                if attempt == self.retries:
                    raise IfqaError(f"{self.base_url}: giving up after {attempt + 1} attempts ({exc})") from None
                delay = self.backoff * (2**attempt) * (0.5 + random.random() / 2)
                log.warning("request failed (%s); retrying in %.1f s", exc, delay)
                if self.stopping.wait(delay):  # the job is stopping (Ctrl-C, SIGTERM): no more attempts
                    raise IfqaError(f"{self.base_url}: stopped while retrying") from None
        raise AssertionError("unreachable")

    def request_body(self, params: GenerationParams) -> tuple[dict, list[str]]:
        """The request's parameters, and the reasoning settings among them (named when a server refuses one).

        OpenAI's reasoning models take ``max_completion_tokens`` and no sampling parameters; a thinking
        budget goes out as vLLM's ``thinking_token_budget`` and llama.cpp's ``thinking_budget_tokens``
        (each server ignores the other's); the thinking switch as ``chat_template_kwargs``, which vLLM,
        SGLang and llama.cpp pass to the chat template (never to OpenAI's own API, which refuses it)."""
        body: dict = {"model": self.model, "seed": params.seed}
        asked: list[str] = []
        if openai_reasoning_model(self.model):
            body["max_completion_tokens"] = params.max_tokens
        else:
            body.update(max_tokens=params.max_tokens, temperature=params.temperature, top_p=params.top_p)
            if params.stop:
                body["stop"] = list(params.stop)
        if params.reasoning_effort:
            body["reasoning_effort"] = params.reasoning_effort
            asked.append(f"reasoning_effort={params.reasoning_effort}")
        extra: dict = {}
        if params.thinking_budget is not None:
            extra["thinking_token_budget"] = extra["thinking_budget_tokens"] = params.thinking_budget
            asked.append(f"thinking budget {params.thinking_budget}")
        if params.thinking is not None and self.chat and "api.openai.com" not in self._url:
            extra["chat_template_kwargs"] = params.template_kwargs()
            asked.append(f"enable_thinking={str(params.thinking).lower()}")
        if extra:
            body["extra_body"] = extra
        return body, asked

    def _request(self, prompt: str, params: GenerationParams) -> Completion:
        openai = self._openai
        common, asked = self.request_body(params)
        reasoning, finish = "", None
        try:
            if self.chat:
                response = self._client.chat.completions.create(
                    messages=[{"role": "user", "content": prompt}], **common
                )
                message = response.choices[0].message
                text = message.content
                reasoning = getattr(message, "reasoning_content", None) or getattr(message, "reasoning", None) or ""
            else:
                response = self._client.completions.create(prompt=prompt, **common)
                text = response.choices[0].text
            finish = response.choices[0].finish_reason
        except openai.APIConnectionError as exc:
            cause = _unreachable(exc)
            if cause is not None:  # retrying cannot fix a refused connection or an unknown host
                raise IfqaError(f"{self.base_url}: cannot connect ({cause})") from None
            raise TransientError(f"{type(exc).__name__}: {_safe_message(exc)}") from None
        except (openai.RateLimitError, openai.APITimeoutError, openai.InternalServerError) as exc:
            raise TransientError(type(exc).__name__) from None
        except openai.APIStatusError as exc:
            if exc.status_code >= 500 or exc.status_code == 429:
                raise TransientError(f"HTTP {exc.status_code}") from None
            if exc.status_code in (400, 422) and asked:  # the reasoning settings are the likely cause: name them
                raise IfqaError(
                    f"{self.base_url}: HTTP {exc.status_code} for a request with {', '.join(asked)} (does model "
                    f"{self.model!r} take it?): {_safe_message(exc)}"
                ) from None
            raise IfqaError(f"{self.base_url}: HTTP {exc.status_code}: {_safe_message(exc)}") from None
        except (IndexError, AttributeError, TypeError, ValueError) as exc:
            raise TransientError(f"malformed response: {type(exc).__name__}") from None
        if text is None and (reasoning or finish == "length"):  # all thinking, or cut off before any text
            text = ""
        if not isinstance(text, str) or not isinstance(reasoning, str):
            raise TransientError("malformed response: no text")
        if unpaired_surrogate(text, reasoning):  # JSON's "\ud800": a str, but no text a file or cache can hold
            raise IfqaError(
                f"{self.base_url}: model {self.model!r} replied with text that is not valid Unicode (a lone "
                "surrogate, \\ud800-\\udfff); the replies received so far are cached"
            )
        usage = getattr(response, "usage", None)
        details = getattr(usage, "completion_tokens_details", None)
        return Completion(
            text,
            getattr(usage, "prompt_tokens", 0) or 0,
            getattr(usage, "completion_tokens", 0) or 0,
            reasoning=reasoning,
            finish_reason=finish if isinstance(finish, str) else None,
            reasoning_tokens=getattr(details, "reasoning_tokens", 0) or 0,
        )


def _unreachable(exc: BaseException) -> BaseException | None:
    """The refused connection or failed name lookup behind a connection error, if that is what it was."""
    import socket

    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if isinstance(exc, (ConnectionRefusedError, socket.gaierror)):
            return exc
        text = str(exc)
        if "Connection refused" in text or "Name or service not known" in text or "nodename nor servname" in text:
            return exc
        exc = exc.__cause__ or exc.__context__
    return None


def _safe_message(exc: Exception) -> str:
    """A server's error text, first line, redacted (a 401 may quote the key it refused)."""
    message = str(getattr(exc, "message", "") or exc)
    # redacted whole before it is cut: a cut would leave a key's head too short to recognise
    return redact(message.splitlines()[0], from_endpoint=True)[:200] if message.strip() else type(exc).__name__


def local_dtype(device: str) -> str:
    """The precision a local transformers model runs in when none is asked: bfloat16 on a GPU, and on a
    CPU with AMX tiles (Sapphire Rapids and later), where torch's bfloat16 matrix products run on them
    (SmolLM2 reads prompts 3.1x faster than in float32 there: benchmarks/llamacpp_reader.py); float32
    on other CPUs, whose bfloat16 products are emulated and slower than float32."""
    import torch

    if device.startswith("cuda"):
        return "bfloat16"
    amx = getattr(torch.cpu, "_is_amx_tile_supported", None)
    return "bfloat16" if device == "cpu" and amx is not None and amx() else "float32"


@contextlib.contextmanager
def _quiet_gguf():
    """transformers' bar over a GGUF file's tensors ignores its own progress switch: hidden while loading;
    and its advice to load a GGUF file in float32 only (bfloat16 measured 2.5x faster on an AMX CPU,
    benchmarks/llamacpp_reader.py) is not shown to the user."""
    from transformers import modeling_gguf_pytorch_utils as gguf_utils

    advice = logging.getLogger("transformers.quantizers.quantizer_gguf")
    level = advice.level
    advice.setLevel(logging.ERROR)
    try:
        with mock.patch.object(gguf_utils, "tqdm", lambda items, **_: items):
            yield
    finally:
        advice.setLevel(level)


class HFBackend:
    """A local causal LM through transformers: batched generation, chat template when the model has one."""

    @classmethod
    def from_options(cls, model: str, options) -> HFBackend:
        return cls(model, options.device, options.batch_size, dtype=None if options.dtype == "auto" else options.dtype)

    def __init__(
        self,
        model: str,
        device: str | None = None,
        batch_size: int = 8,
        chat: bool | None = None,
        dtype: str | None = None,
    ):
        source, gguf = model, {}
        if is_local_file_model(model) and not all(map(importlib.util.find_spec, ("gguf", "accelerate"))):
            raise IfqaError("--backend hf reads a GGUF file with gguf and accelerate: pip install 'ifqa[llamacpp]'")
        self.device = pick_device(device)
        if is_local_file_model(model):  # a GGUF file (demo:smollm2 too): transformers dequantizes it
            path = model_file(model)
            source, gguf = str(path.parent), {"gguf_file": path.name}
        else:
            check_model_location(model)
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()
        with loading(model, "model"), _quiet_gguf():
            self.tokenizer = AutoTokenizer.from_pretrained(source, **gguf)
            torch_dtype = getattr(torch, dtype or local_dtype(self.device))
            self.model = AutoModelForCausalLM.from_pretrained(source, dtype=torch_dtype, **gguf).to(self.device).eval()
        self.tokenizer.padding_side = "left"
        if self.tokenizer.pad_token is None:
            self.tokenizer.pad_token = self.tokenizer.eos_token
        self.name, self.batch_size = model, batch_size
        self.chat = bool(self.tokenizer.chat_template) if chat is None else chat

    def describe(self) -> dict:
        weights = str(self.model.dtype).removeprefix("torch.")  # in the cache key: other precision, other answers
        return {"backend": "hf", "model": self.name, "chat": self.chat, "device": self.device, "weights": weights}

    def count_tokens(self, text: str) -> int:
        return len(self.tokenizer(text)["input_ids"])

    def context_window(self) -> int | None:
        return getattr(self.model.config, "max_position_embeddings", None)

    def _format(self, prompt: str, params: GenerationParams) -> str:
        return chat_prompt(self.tokenizer, prompt, params.template_kwargs()) if self.chat else prompt

    def template_thinks(self) -> bool:
        return self.chat and template_thinks(self.tokenizer)

    def complete(self, prompts: Sequence[str], params: GenerationParams) -> list[Completion]:
        import torch
        from transformers import LogitsProcessorList

        out: list[Completion] = []
        eos = self.tokenizer.eos_token_id
        for start in range(0, len(prompts), self.batch_size):
            batch = [self._format(p, params) for p in prompts[start : start + self.batch_size]]
            opened = [opened_tag(text) if self.chat else "" for text in batch]
            encoded = self.tokenizer(batch, return_tensors="pt", padding=True, add_special_tokens=not self.chat).to(
                self.device
            )
            width = encoded["input_ids"].shape[1]
            processors = LogitsProcessorList()
            if params.thinking_budget is not None:
                processors.append(
                    ThinkingBudget(self.tokenizer, params.thinking_budget, width, [bool(tag) for tag in opened])
                )
            sampling = params.temperature > 0
            if sampling:
                torch.manual_seed(params.seed)
            with torch.inference_mode():
                generated = self.model.generate(
                    **encoded,
                    max_new_tokens=params.max_tokens,
                    do_sample=sampling,
                    temperature=params.temperature if sampling else None,
                    top_p=params.top_p if sampling else None,
                    pad_token_id=self.tokenizer.pad_token_id,
                    logits_processor=processors,
                )
            for row, mask, tag in zip(generated, encoded["attention_mask"], opened):
                new = row[width:]
                produced = int((new != self.tokenizer.pad_token_id).sum())
                ended = eos is not None and bool((new == eos).any())
                text = tag + self.tokenizer.decode(new, skip_special_tokens=True)
                for stop in params.stop:
                    text = text.split(stop, 1)[0]
                finish = "stop" if ended or produced < len(new) else "length"
                out.append(Completion(text, int(mask.sum()), produced, finish_reason=finish))
        return out  # reasoning tokens are counted by CachedGenerator, with count_tokens, for every backend
