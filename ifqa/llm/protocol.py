"""The backend contract, in one piece: what a command's settings give a backend (``BackendOptions``),
what is asked of it (``GenerationParams``), what it answers (``Completion``), and ``Backend``, the
base class every backend subclasses, whose attributes declare what a backend can do (the session and
the generator read them; nothing is probed). A new backend is one module with a ``Backend`` subclass
and one line in ``registry.LLM_BACKENDS`` (tests/llm/test_protocol.py adds a toy one)."""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, fields

from ifqa.llm.thinking import opened_tag
from ifqa.model_options import BATCH_SIZE, RETRIES, TIMEOUT


@dataclass(frozen=True)
class BackendOptions:
    """What any backend may read of a command's settings (each takes the ones it uses); the fields are
    ``ModelOptions``' of the same name, copied by name (``from_access``)."""

    base_url: str | None = None
    api_key: str | None = None
    completions: bool = False
    device: str | None = None
    batch_size: int = BATCH_SIZE
    timeout: float = TIMEOUT
    retries: int = RETRIES
    model_threads: int | None = None  # local models on the CPU (llama.cpp): threads; None: devices.cpu_threads()
    context_window: int | None = None  # llama.cpp and vLLM: tokens of context to allocate; None: the model's
    gguf_weights: str = "auto"  # llama.cpp: a quantized file's weights as stored, or an F16 working copy
    dtype: str = "auto"  # transformers: the weights' precision; auto: bfloat16 on a GPU or an AMX CPU, else float32

    @classmethod
    def from_access(cls, access, api_key: str | None = None) -> BackendOptions:
        """The options of a ``ModelAccess`` (any object holding these names), field by field."""
        given = {f.name: getattr(access, f.name) for f in fields(cls) if f.name != "api_key"}
        return cls(api_key=api_key, **given)


#: A prompt's shape, for measuring what a chat template adds around one (``Backend.template_tokens``).
TEMPLATE_PROBE = "Question: Who wrote it?\nAnswer:"

#: The options only some backends read (the rest every command uses, or comes from the environment).
SPECIFIC = (
    "completions",
    "device",
    "timeout",
    "retries",
    "model_threads",
    "context_window",
    "gguf_weights",
    "dtype",
    "reasoning_effort",  # sent by the OpenAI-compatible backend alone (no local chat template takes it)
)


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
        return {name: value for name, value in asdict(self).items() if value is not None}

    def template_kwargs(self) -> dict:
        """The chat template's thinking switch (Qwen3's ``enable_thinking``), when one is asked for."""
        return {} if self.thinking is None else {"enable_thinking": self.thinking}


#: Called with a prompt's position and its completion as soon as that completion is finished.
Done = Callable[[int, "Completion"], None]


def cut_at_stops(text: str, stops: Sequence[str]) -> str:
    """``text`` up to the first of ``stops`` it holds (where a server would have stopped)."""
    for stop in stops:
        text = text.split(stop, 1)[0]
    return text


_CALL = threading.local()  # the call a request thread works for (``generation.concurrently`` sets it)
_NEVER = threading.Event()


def call_stop() -> threading.Event:
    """Set when the call this thread's request belongs to stops (it failed, Ctrl-C, SIGTERM): a retry
    backoff waits on it. Per call, not per backend: ``ifqa serve`` runs many calls on one backend, and one
    request failing must not stop another's retries."""
    return getattr(_CALL, "stop", None) or _NEVER


def on_call(stop: threading.Event) -> None:
    """Tie this thread's requests to ``stop`` (``call_stop``)."""
    _CALL.stop = stop


class Backend:
    """A backend: ``from_options``, ``complete`` and ``describe``; the rest says what it can do.

    ``concurrent_requests``: requests go out on threads, ``concurrency`` at a time (an HTTP endpoint),
    each reply stored as it arrives; otherwise a wave of prompts is handed over at once (local models).
    ``batch_size``: prompts a local backend generates together (a wave keeps several batches busy).
    ``takes_thinking_budget``: a thinking budget can be asked of it. ``chat``: prompts go through a chat
    template (its opened thinking tag is then the completion's first words: ``prefill``). A request
    waiting to retry ends when its call stops (``call_stop``)."""

    chat: bool = False
    concurrent_requests: bool = False
    batch_size: int = 1
    takes_thinking_budget: bool = True
    #: The backend-specific ``BackendOptions`` it reads; one of ``SPECIFIC`` set to another value for a
    #: backend that does not read it is refused (``ModelAccess.backend_instance``), never ignored.
    reads: frozenset[str] = frozenset()

    @classmethod
    def from_options(cls, model: str, options: BackendOptions) -> Backend:
        return cls(model, options)  # a backend whose constructor takes other arguments overrides it

    def complete(self, prompts: Sequence[str], params: GenerationParams, done: Done | None = None) -> list[Completion]:
        """One completion per prompt; ``done(i, completion)`` as each is finished (a local batch's
        sequences finish at different steps), so the caller stores it then: a kill loses only the
        completions still being generated."""
        raise NotImplementedError

    def describe(self) -> dict:
        """What made the answers: backend, model, chat, and whatever else changes them (weights, file
        content): the response cache's key holds it."""
        raise NotImplementedError

    def count_tokens(self, text: str) -> int:
        """About four characters a token for English (an over-estimate by ~10% keeps prompts inside the window)."""
        return math.ceil(len(text) / 4 * 1.1)

    def context_window(self) -> int | None:
        return None

    def template_tokens(self, params: GenerationParams) -> int:
        """Tokens a local chat template adds around a prompt (its turn markers), which the model's window
        must hold besides the prompt (0 where the server applies its template and counts nothing here)."""
        return 0

    def template_thinks(self) -> bool:
        return False

    def prefill(self, formatted: str) -> str:
        """The thinking tag a formatted chat prompt leaves open (the template wrote it, so the completion
        starts inside the thinking): put back in front of the completion's text."""
        return opened_tag(formatted) if self.chat else ""
