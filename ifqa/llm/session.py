"""One model session: what every caller of a model shares, in one object (docs/ARCHITECTURE.md, "One
model session"). It turns prompts into ``Reply``s, the thinking split off in every shape servers send
and the answer cut at the caller's stops after it, so a reasoning model reads the same in every
command and no caller sees a raw completion's shape."""

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

    def __init__(self, backend: Backend, access, cache: ResponseCache | None = None):
        self.backend, self.access = backend, access
        asked = access.thinking_budget is not None or access.reasoning_effort is not None  # a reasoning setting
        self.thinks = thinking.resolve(
            access.thinking, backend.describe().get("model"), backend.template_thinks(), asked
        )
        self.counters = Counters()
        self._generate = CachedGenerator(backend, cache, access.concurrency, self.counters)
        self.count_tokens = backend.count_tokens

    def template_tokens(self) -> int:
        """Tokens the backend's chat template adds around each prompt (with this session's thinking switch)."""
        return self.backend.template_tokens(self.access.params(1, 0.0, (), 0))

    @classmethod
    def open(cls, access, api_key: str | None = None) -> ModelSession:
        """The session of ``access`` (a ``ModelAccess``): its settings checked, its backend made, its cache opened."""
        access.require_model()
        return cls(access.backend_instance(api_key), access, None if access.no_cache else ResponseCache(access.cache))

    def max_tokens(self, plain: int) -> int:
        """Tokens to generate: the command's ``--max-tokens``, else ``plain``; a model that thinks gets the
        reasoning default instead, or its thinking budget plus room to answer."""
        given, budget = getattr(self.access, "max_tokens", None), self.access.thinking_budget
        if given or not self.thinks:
            return given or plain
        if budget is None:
            return thinking.REASONING_MAX_TOKENS
        return max(thinking.REASONING_MAX_TOKENS, budget + thinking.ANSWER_ROOM)

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
        """``items`` in waves, a progress bar (with the counters) moved as each is done: a wave keeps every
        request slot (or local batch) busy several times over, and is few enough for the bar to move."""
        from tqdm import tqdm

        wave = max(self._generate.concurrency, self.backend.batch_size) * 4
        with tqdm(total=len(items), desc=desc, unit="q", disable=not progress) as bar:
            for start in range(0, len(items), wave):
                yield items[start : start + wave]
                bar.update(min(wave, len(items) - start))
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
        return {"backend": self.backend.describe(), "thinks": self.thinks, "counters": self.counters.as_dict()}
