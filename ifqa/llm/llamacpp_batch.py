"""Several prompts generated together on one llama.cpp context: what questions read one after another
cannot share.

A batch of prompts is decoded as sequences of one context, each on its own KV stream (llama.cpp's
non-unified cache: a token attends to its own sequence's cells only, so reading eight prompts costs
what reading them one by one does; a unified cache made every token attend over every sequence's
cells, 20-30% slower on 800-token prompts). The prefix all of them share (the chat template's system
turn, the instruction, demonstrations) is evaluated once on sequence 0 and copied to the others'
streams; it stays cached for the next batch. The streams are sized to the longest prompt and its
generation seen so far (the context is made again, larger, when a batch needs more), so a model with
a long window does not allocate it eight times over. The prompts' own tokens are packed into full
decode batches, and every generation step advances all unfinished sequences together, so the
weights are read once per step for all of them (a single sequence's step reads them all for one
token). Sampling is done here: greedy at temperature 0, else temperature and top-p with a generator
seeded by the request's seed and the prompt, so an answer does not depend on which prompts shared
its batch. Stop strings, the end-of-generation tokens, the token limit and a thinking budget
(``local_thinking.BudgetState``) end a sequence as an OpenAI-compatible server would, with its
``finish_reason``.
"""

from __future__ import annotations

import ctypes
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from ifqa.llm.local_models import set_fields
from ifqa.llm.local_thinking import BudgetState
from ifqa.llm.protocol import GenerationParams, cut_at_stops

BATCH_TOKENS = 512  # tokens per llama_decode call while reading prompts (llama.cpp's default n_batch)
STREAM_STEP = 1024  # a sequence's stream grows in steps of this many cells


@dataclass
class Generated:
    """One sequence's result: its text, token counts and why it stopped (``stop`` or ``length``)."""

    text: str
    prompt_tokens: int
    completion_tokens: int
    finish_reason: str


@dataclass
class _Sequence:
    seq: int
    tokens: list[int]
    rng: np.random.Generator | None
    budget: BudgetState | None
    generated: list[int] = field(default_factory=list)
    data: bytearray = field(default_factory=bytearray)
    text: str = ""
    finish: str | None = None
    next_token: int | None = None
    reported: bool = False


class BatchedGenerator:
    """Generation for several prompts at once, one KV stream each, on one llama.cpp context (see the module)."""

    def __init__(self, model, window: int, max_sequences: int, threads: int, adapter=None):
        """``model``: llama.cpp's ``LlamaModel``; ``adapter``: a LoRA adapter (``llama_adapter_lora_init``'s)
        applied to every context made for it."""
        import llama_cpp
        from llama_cpp import _internals

        self._llama_cpp, self._internals = llama_cpp, _internals
        self.model, self.window, self.max_sequences, self.threads = model, window, max_sequences, threads
        self.adapter = adapter
        self.vocab = model.vocab
        self.n_vocab = model.n_vocab()
        self.common_prefix = llama_cpp.Llama.longest_token_prefix
        self.ctx, self.stream = None, 0  # made on first use, for the cells a batch needs
        self.batch = _internals.LlamaBatch(n_tokens=BATCH_TOKENS, embd=0, n_seq_max=1, verbose=False)
        self.cached: list[int] = []  # the prefix sequence 0 holds between calls

    def _context_for(self, cells: int) -> None:
        """A context whose streams hold ``cells`` each (made again, larger, when they do not)."""
        if self.ctx is not None and cells <= self.stream:
            return
        from llama_cpp._utils import suppress_stdout_stderr

        llama_cpp = self._llama_cpp
        self.stream = min(self.window, -(-cells // STREAM_STEP) * STREAM_STEP)
        params = llama_cpp.llama_context_default_params()
        set_fields(
            params,
            n_ctx=self.stream * self.max_sequences,
            n_batch=BATCH_TOKENS,
            n_ubatch=BATCH_TOKENS,
            n_seq_max=self.max_sequences,
            n_threads=self.threads,
            n_threads_batch=self.threads,
            kv_unified=False,
            no_perf=True,
            flash_attn_type=llama_cpp.LLAMA_FLASH_ATTN_TYPE_ENABLED,
        )
        if self.ctx is not None:
            self.ctx.close()
        self.ctx, self.cached = None, []
        with suppress_stdout_stderr(disable=False):  # llama.cpp's notes on the context it makes
            self.ctx = self._internals.LlamaContext(model=self.model, params=params, verbose=False)
        if self.adapter is not None:
            adapters = (llama_cpp.llama_adapter_lora_p_ctypes * 1)(self.adapter)
            scales = (ctypes.c_float * 1)(1.0)
            if llama_cpp.llama_set_adapters_lora(self.ctx.ctx, adapters, 1, scales):
                raise RuntimeError("llama.cpp did not apply the LoRA adapter to its context")

    def generate(
        self,
        prompts: Sequence[Sequence[int]],
        params: GenerationParams,
        budgets: Sequence[BudgetState | None] | None = None,
        done: Callable[[int, Generated], None] | None = None,
    ) -> list[Generated]:
        """One result per prompt (``budgets``: each prompt's thinking budget, or None); ``done(i, result)``
        the step prompt i's sequence ends."""
        results: list[Generated | None] = [None] * len(prompts)
        every = list(budgets) if budgets else [None] * len(prompts)
        for start in range(0, len(prompts), self.max_sequences):  # consecutive prompts, max_sequences at a time
            group = range(start, min(start + self.max_sequences, len(prompts)))
            self._context_for(max(len(prompts[i]) for i in group) + params.max_tokens)
            report = None if done is None else lambda seq, g, group=group: done(group[seq], g)
            made = self._run([prompts[i] for i in group], [every[i] for i in group], params, report)
            for i, generated in zip(group, made):
                results[i] = generated
        return results  # type: ignore[return-value]

    def _decode(self) -> None:
        if self.batch.batch.n_tokens:
            self.ctx.decode(self.batch)

    def _add(self, token: int, position: int, seq: int, logits: bool) -> int:
        """Put one token in the decode batch; its index there."""
        b = self.batch.batch
        j = b.n_tokens
        b.token[j], b.pos[j], b.n_seq_id[j], b.logits[j] = token, position, 1, logits
        b.seq_id[j][0] = seq
        b.n_tokens = j + 1
        return j

    def _run(self, prompts, budgets, params: GenerationParams, report=None) -> list[Generated]:
        ctx = self.ctx
        shared = min(self.common_prefix(prompts[0], p) for p in prompts)
        shared = min(shared, min(len(p) for p in prompts) - 1)  # every sequence decodes a token of its own
        keep = self.common_prefix(self.cached, prompts[0][:shared])
        ctx.kv_cache_seq_rm(0, keep, -1)
        for seq in range(1, self.max_sequences):
            ctx.kv_cache_seq_rm(seq, 0, -1)
        self.batch.reset()
        for position in range(keep, shared):  # the shared prefix, once, on sequence 0
            if self.batch.batch.n_tokens == BATCH_TOKENS:
                self._decode()
                self.batch.reset()
            self._add(prompts[0][position], position, 0, False)
        self._decode()
        self.batch.reset()
        self.cached = list(prompts[0][:shared])
        for seq in range(1, len(prompts) if shared else 0):  # sequence 0 holds the prefix alone: its stream, whole
            ctx.kv_cache_seq_cp(0, seq, -1, -1)
        sequences = [
            _Sequence(
                seq,
                list(tokens),
                np.random.default_rng([params.seed, zlib.crc32(np.asarray(tokens, dtype=np.int32).tobytes())])
                if params.temperature > 0
                else None,
                budget,
            )
            for seq, (tokens, budget) in enumerate(zip(prompts, budgets))
        ]
        # each prompt's own tokens, packed into full batches; a sequence's first token is sampled from
        # the logits of its last prompt token, read right after the batch that holds it
        pending = [(s, position) for s in sequences for position in range(shared, len(s.tokens))]
        for start in range(0, len(pending), BATCH_TOKENS):
            last = {}
            for s, position in pending[start : start + BATCH_TOKENS]:
                final = position == len(s.tokens) - 1
                j = self._add(s.tokens[position], position, s.seq, final)
                if final:
                    last[s.seq] = j
            self._decode()
            for s in sequences:
                if s.seq in last:
                    self._step(s, last[s.seq], params)
            self._report(sequences, report)
            self.batch.reset()
        while True:
            active = [s for s in sequences if s.finish is None]
            if not active:
                break
            self.batch.reset()
            rows = {s.seq: self._add(s.next_token, len(s.tokens) + len(s.generated) - 1, s.seq, True) for s in active}
            self._decode()
            for s in active:
                self._step(s, rows[s.seq], params)
            self._report(sequences, report)
        for seq in range(1, len(prompts)):
            ctx.kv_cache_seq_rm(seq, 0, -1)
        ctx.kv_cache_seq_rm(0, shared, -1)  # only the shared prefix stays cached
        return [Generated(s.text, len(s.tokens), len(s.generated), s.finish or "length") for s in sequences]

    @staticmethod
    def _report(sequences: list[_Sequence], report) -> None:
        """Hand each sequence that ended this step to ``report`` (its position in the group, its result)."""
        for s in sequences:
            if s.finish is not None and not s.reported:
                s.reported = True
                if report is not None:
                    report(s.seq, Generated(s.text, len(s.tokens), len(s.generated), s.finish))

    def _step(self, s: _Sequence, row: int, params: GenerationParams) -> None:
        """Choose the sequence's next token from the logits at ``row`` and see whether it ends there."""
        llama_cpp = self._llama_cpp
        forced = s.budget.next_forced(s.generated) if s.budget else None
        if forced is not None:
            token = forced
        else:
            logits = np.ctypeslib.as_array(self.ctx.get_logits_ith(row), shape=(self.n_vocab,))
            token = _sample(logits, params.temperature, params.top_p, s.rng)
        if llama_cpp.llama_vocab_is_eog(self.vocab, token):
            s.finish = "stop"
            return
        s.generated.append(token)
        s.data += self.model.detokenize([token], special=True)  # the token's own piece, as a server streams it
        s.text = s.data.decode("utf-8", "replace")
        cut = cut_at_stops(s.text, params.stop)
        if cut != s.text:
            s.text, s.finish = cut, "stop"
            return
        if len(s.generated) >= params.max_tokens:
            s.finish = "length"
            return
        s.next_token = token


def _sample(logits: np.ndarray, temperature: float, top_p: float, rng: np.random.Generator | None) -> int:
    """Greedy at temperature 0; else the temperature-scaled distribution, cut to ``top_p``."""
    if temperature <= 0 or rng is None:
        return int(np.argmax(logits))
    scaled = logits.astype(np.float64) / temperature
    scaled -= scaled.max()
    probs = np.exp(scaled)
    probs /= probs.sum()
    if top_p < 1.0:
        order = np.argsort(-probs)
        keep = order[: int(np.searchsorted(np.cumsum(probs[order]), top_p)) + 1]
        kept = probs[keep] / probs[keep].sum()
        return int(keep[rng.choice(len(keep), p=kept)])
    return int(rng.choice(len(probs), p=probs))
