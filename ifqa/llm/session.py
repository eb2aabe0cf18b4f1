"""One model session: what every caller of a model shares, in one object.

The LLM reader, the iterative reader, the judge, the LLM twins, query rewriting and ``ifqa serve``
each prompt a model. A ``ModelSession`` holds that model's backend, whether it thinks first, the
response cache and the counters, and turns prompts into ``Reply``s: the thinking split off
(``thinking.split``, in every shape servers send), the answer cut at the caller's stop sequences
(which apply after the thinking, never inside it), and every reply cut off while thinking counted
once, here. Callers never see a raw completion's shape, so a reasoning model reads the same in
every command.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from ifqa.llm import thinking
from ifqa.llm.cache import ResponseCache
from ifqa.llm.generation import CachedGenerator, Counters
from ifqa.llm.protocol import Backend, Completion, GenerationParams, cut_at_stops


@dataclass(frozen=True)
class Ask:
    """What a caller asks of every prompt it hands over at once.

    ``stops`` end the answer (a plain model's server stops there; a thinking model's answer is cut
    there after its thinking, since a blank line inside the thinking is no end). ``ends`` end the
    turn wherever they appear, thinking included: a tag the caller acts on (``</search>``)."""

    max_tokens: int
    temperature: float = 0.0
    seed: int = 0
    stops: tuple[str, ...] = ()
    ends: tuple[str, ...] = ()


@dataclass(frozen=True)
class Reply:
    """A completion read: ``answer`` is the text to take an answer from ("" when ``truncated``: cut
    off while thinking, so no draft from inside the thinking is ever an answer)."""

    completion: Completion
    answer: str
    thinking: str = ""
    truncated: bool = False

    @property
    def raw(self) -> str:
        """The completion's text as the model wrote it (inline thinking included)."""
        return self.completion.text


class ModelSession:
    """A model's backend, whether it thinks, its response cache and its counters (see the module)."""

    def __init__(self, backend: Backend, access, cache: ResponseCache | None = None, concurrency: int | None = None):
        self.backend, self.access = backend, access
        self.thinks = access.thinks(backend)
        self.counters = Counters()
        self._generate = CachedGenerator(
            backend, cache, access.concurrency if concurrency is None else concurrency, self.counters
        )
        self.count_tokens = backend.count_tokens

    def template_tokens(self) -> int:
        """Tokens the backend's chat template adds around each prompt (with this session's thinking switch)."""
        return self.backend.template_tokens(self.access.params(1, 0.0, (), 0))

    @classmethod
    def open(cls, access, api_key: str | None = None) -> ModelSession:
        """The session of ``access`` (a ``ModelAccess``): its settings checked, its backend made, its cache opened."""
        access.require_model()
        return cls(access.backend_instance(api_key), access, access.response_cache())

    @property
    def wave(self) -> int:
        """Prompts to hand over at once (enough to keep every request slot or local batch busy)."""
        return self._generate.wave

    def describe(self) -> dict:
        return self.backend.describe()

    def context_window(self) -> int | None:
        return self.backend.context_window()

    def max_tokens(self, plain: int) -> int:
        """Tokens to generate: the command's ``--max-tokens``, else ``plain`` (a model that thinks gets
        its thinking allowance instead)."""
        given = getattr(self.access, "max_tokens", None)
        if given:
            return given
        return self.access.thinking_max_tokens() if self.thinks else plain

    def params(self, ask: Ask) -> GenerationParams:
        """What is sent: a thinking model gets only the turn's ends as stop sequences (see ``Ask``)."""
        stops = ask.ends + (() if self.thinks else ask.stops)
        return self.access.params(ask.max_tokens, ask.temperature, tuple(dict.fromkeys(stops)), ask.seed)

    def ask(self, prompts: Sequence[str], asks: Ask | Sequence[Ask]) -> list[Reply]:
        """One reply per prompt, through the response cache (``asks``: one for all, or one per prompt)."""
        every = [asks] * len(prompts) if isinstance(asks, Ask) else list(asks)
        completions = self._generate(list(prompts), [self.params(a) for a in every])
        replies = [self.reply_of(c, a) for c, a in zip(completions, every)]
        self.counters.truncated += sum(r.truncated for r in replies)
        return replies

    def ask_all(self, prompts: Sequence[str], ask: Ask, desc: str, progress: bool = True) -> list[Reply]:
        """``ask`` over many prompts in waves, moving a progress bar."""
        return [reply for wave in self.in_waves(prompts, desc, progress) for reply in self.ask(wave, ask)]

    def in_waves(self, items: Sequence, desc: str, progress: bool = True) -> Iterator[Sequence]:
        """``items`` in waves of ``wave``, a progress bar (with the counters) moved as each is done."""
        from tqdm import tqdm

        with tqdm(total=len(items), desc=desc, unit="q", disable=not progress) as bar:
            for start in range(0, len(items), self.wave):
                yield items[start : start + self.wave]
                bar.update(min(self.wave, len(items) - start))
                bar.set_postfix(self.counters.as_dict(), refresh=False)

    def reply_of(self, completion: Completion, ask: Ask) -> Reply:
        """A completion told apart: the thinking, the answer after it cut at the stops, truncation."""
        split = thinking.split(completion.text, completion.reasoning, completion.finish_reason, self.thinks)
        answer = cut_at_stops(split.answer, ask.stops + ask.ends)
        # a turn that ended at one of its ends inside the thinking (a search asked while thinking) was not cut off
        ended = bool(ask.ends) and completion.finish_reason == "stop"
        return Reply(completion, answer, split.thinking, split.truncated and not ended)

    def record(self) -> dict:
        """What a manifest keeps of the session: the backend, whether it thinks, the counters."""
        return {"backend": self.describe(), "thinks": self.thinks, "counters": self.counters.as_dict()}
