"""Completions through the response cache, with counters: what every caller of a model shares.

Misses go to the backend: concurrent threads for a backend that takes ``concurrent_requests`` (HTTP
endpoints), waves of prompts for the others (in-process models). Each completion is stored the
moment it arrives, so an interrupted job loses nothing.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field

from ifqa.llm.cache import ResponseCache, key
from ifqa.llm.protocol import Backend, Completion, GenerationParams, on_call
from ifqa.llm.thinking import split


@dataclass
class Counters:
    requests: int = 0
    cache_hits: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    retries: int = 0
    reasoning_tokens: int = 0  # of completion_tokens, those spent thinking (reported by the server or counted)
    truncated: int = 0  # answers cut off inside their thinking (set by the caller that reads the replies)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def add(self, hit: bool, completion: Completion) -> None:
        with self._lock:
            if hit:
                self.cache_hits += 1
            else:
                self.requests += 1
                self.prompt_tokens += completion.prompt_tokens
                self.completion_tokens += completion.completion_tokens
                self.reasoning_tokens += completion.reasoning_tokens
                self.retries += completion.retries

    def as_dict(self) -> dict:
        """The counts, as a manifest records them."""
        counts = {
            k: getattr(self, k) for k in ("requests", "cache_hits", "prompt_tokens", "completion_tokens", "retries")
        }
        if self.reasoning_tokens or self.truncated:  # a plain model's counters read as they always did
            counts.update(reasoning_tokens=self.reasoning_tokens, truncated=self.truncated)
        return counts


def concurrently(function, items: Sequence, workers: int):
    """``(item, function(item))`` as each call finishes, ``workers`` at a time on daemon threads.

    A failure, Ctrl-C or SIGTERM stops it at once: the calls still waiting never start, a request
    waiting to retry ends (``protocol.call_stop``: this call's, so calls beside it on the same backend go
    on), and a request still in flight is abandoned with its thread instead of being waited for (a
    thread pool joins its threads at exit: up to a request's timeout, minutes with retries)."""
    pending: queue.SimpleQueue = queue.SimpleQueue()
    for item in items:
        pending.put(item)
    done: queue.SimpleQueue = queue.SimpleQueue()
    stop = threading.Event()

    def work() -> None:
        on_call(stop)
        while not stop.is_set():
            try:
                item = pending.get_nowait()
            except queue.Empty:
                return
            try:
                done.put((item, function(item), None))
            except BaseException as exc:  # noqa: BLE001 - handed to the caller's thread, which raises it
                stop.set()  # the call fails: no worker starts another request
                done.put((item, None, exc))
                return

    for _ in range(max(1, min(workers, len(items)))):
        threading.Thread(target=work, daemon=True, name="ifqa-request").start()
    try:
        for _ in range(len(items)):
            while True:
                try:
                    item, value, error = done.get(timeout=0.2)  # a short wait: signals are handled between waits
                    break
                except queue.Empty:
                    continue
            if error is not None:
                raise error
            yield item, value
    except BaseException:  # an error, Ctrl-C or SIGTERM, or the caller gave up: the other calls stop too
        stop.set()
        raise


class CachedGenerator:
    """Completions through the cache; misses go to the backend (threads for HTTP, batches for local models)."""

    def __init__(self, backend: Backend, cache: ResponseCache | None, concurrency: int, counters: Counters):
        self.backend, self.cache, self.concurrency, self.counters = backend, cache, concurrency, counters

    def __call__(self, prompts_: Sequence[str], params: Sequence[GenerationParams]) -> list[Completion]:
        description = self.backend.describe()
        identity = {k: description[k] for k in ("backend", "model", "chat", "weights", "content") if k in description}
        keys = [key({**identity, "prompt": p, "params": q.as_dict()}) for p, q in zip(prompts_, params)]
        results: list[Completion | None] = [None] * len(prompts_)
        for i, cache_key in enumerate(keys):
            stored = self.cache.get(cache_key) if self.cache else None
            if stored is not None:
                results[i] = Completion(**stored)
                self.counters.add(True, results[i])
        todo = [i for i, r in enumerate(results) if r is None]

        def store(i: int, completion: Completion) -> Completion:
            if not completion.reasoning_tokens:  # inline thinking over HTTP: the server counted no reasoning apart
                thinking = split(completion.text, completion.reasoning).thinking
                if thinking:
                    counted = self.backend.count_tokens(thinking)
                    completion.reasoning_tokens = min(counted, completion.completion_tokens or counted)
            if self.cache:
                self.cache.put(keys[i], asdict(completion))
            return completion

        def finish(i: int, completion: Completion) -> None:
            results[i] = completion
            self.counters.add(False, completion)

        if self.backend.concurrent_requests:
            # each reply is stored by the thread that received it, before that thread sends another
            # request: a kill loses only the requests in flight, never a reply waiting for this thread
            calls = concurrently(
                lambda i: store(i, self.backend.complete([prompts_[i]], params[i])[0]),
                todo,
                self.concurrency,
            )
            for i, completion in calls:
                finish(i, completion)
        else:
            groups: dict[GenerationParams, list[int]] = {}
            for i in todo:
                groups.setdefault(params[i], []).append(i)
            stored: set[int] = set()

            for group_params, indices in groups.items():

                def done(j: int, completion: Completion, indices=indices) -> None:  # stored the moment it ends
                    finish(indices[j], store(indices[j], completion))
                    stored.add(indices[j])

                made = self.backend.complete([prompts_[i] for i in indices], group_params, done)
                for i, completion in zip(indices, made):
                    if i not in stored:
                        finish(i, store(i, completion))
        return results  # type: ignore[return-value]
