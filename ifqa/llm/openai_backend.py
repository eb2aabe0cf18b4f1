"""Any OpenAI-compatible endpoint (OpenAI, vLLM's server, llama.cpp's server, Ollama): chat or
completions. It retries 429s, 5xx, timeouts, dropped connections and malformed responses with
exponential backoff; it never logs or returns the API key."""

from __future__ import annotations

import logging
import random
from collections.abc import Sequence

from ifqa.errors import IfqaError
from ifqa.io import unpaired_surrogate
from ifqa.llm.protocol import Backend, BackendOptions, Completion, Done, GenerationParams, call_stop
from ifqa.llm.thinking import OPENAI_REASONING
from ifqa.model_options import RETRIES, TIMEOUT
from ifqa.redact import add_secret, add_url_secrets, redact, redact_url

log = logging.getLogger(__name__)


class TransientError(Exception):
    """A failure worth retrying (rate limit, server error, timeout, malformed response)."""


class OpenAIBackend(Backend):
    """Chat or completions on any OpenAI-compatible server (OpenAI, vLLM, llama.cpp, Ollama)."""

    reads = frozenset({"completions", "timeout", "retries", "reasoning_effort"})

    concurrent_requests = True

    @classmethod
    def from_options(cls, model: str, options: BackendOptions) -> OpenAIBackend:
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
        timeout: float = TIMEOUT,
        retries: int = RETRIES,
        backoff: float = 1.0,
    ):
        import os

        import openai

        self.model, self.chat, self.retries, self.backoff = model, chat, retries, backoff
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

    def complete(self, prompts: Sequence[str], params: GenerationParams, done: Done | None = None) -> list[Completion]:
        completions = []
        for i, prompt in enumerate(prompts):
            completions.append(self._complete_one(prompt, params))
            if done is not None:
                done(i, completions[-1])
        return completions

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
                if call_stop().wait(delay):  # its call is stopping (a failure, Ctrl-C, SIGTERM): no more attempts
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
        if OPENAI_REASONING.search(self.model):
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
