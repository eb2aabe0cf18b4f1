"""GGUF models in this process through llama.cpp (llama-cpp-python): the runtime CPU users run GGUF
files with, and the one ``demo:smollm2`` is read by.

The model file says how to prompt it: its chat template (``tokenizer.chat_template``, rendered as
transformers renders it, with the thinking switch when one is asked) and its context window
(``<arch>.context_length``, at most ``MAX_CONTEXT`` unless ``--context-window`` says otherwise). The
prompts of a wave are generated together, ``--batch-size`` at a time, by
``llamacpp_batch.BatchedGenerator``: one KV stream each, sized to what the prompts need, their shared
prefix (the template's system turn, the instruction, demonstrations) evaluated once and kept for the
next wave, their generation steps taken together. Flash attention is on. Same interface as every backend (``complete``,
``count_tokens``, ``context_window``, ``template_thinks``, ``describe``), so the response cache, the
counters and resuming are the ones every command has (benchmarks/llamacpp_reader.py measures it
against llama-cpp-python's own one-by-one reading).
"""

from __future__ import annotations

import ctypes
import logging
import os
from collections.abc import Sequence

from ifqa.errors import IfqaError
from ifqa.llm import BackendOptions
from ifqa.llm.backends import Completion, GenerationParams
from ifqa.llm.llamacpp_batch import BatchedGenerator
from ifqa.llm.local_models import f16_copy, model_file, open_llama, wants_f16
from ifqa.llm.local_thinking import BudgetState, closing_for, template_thinks
from ifqa.llm.thinking import opened_tag

log = logging.getLogger(__name__)

#: The context allocated when neither the file nor the user says less: a 128k-token window's KV
#: cache would take gigabytes before the first question.
MAX_CONTEXT = 16_384


class LlamaCppBackend:
    """A GGUF model file (or ``demo:smollm2``) in this process, on llama.cpp."""

    takes_thinking_budget = True

    @classmethod
    def from_options(cls, model: str, options: BackendOptions) -> LlamaCppBackend:
        return cls(model, options)

    def __init__(self, model: str, options: BackendOptions = BackendOptions()):
        """Reads ``options``' threads (None: every core), context_window (None: the file's, at most
        ``MAX_CONTEXT``), completions (plain text, no chat template) and batch_size (sequences decoded together)."""
        path = model_file(model)  # a demo model's package, a file that is there and is GGUF: one line each
        try:
            import llama_cpp
        except ImportError:
            raise IfqaError(
                "--backend llamacpp needs llama-cpp-python, which is not installed: pip install 'ifqa[llamacpp]' "
                "(it builds llama.cpp from source: about 10 minutes on 2 cores)"
            ) from None
        self.name, self.path = model, path
        self.threads = options.threads or (
            len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
        )
        self.batch_size = options.batch_size
        try:
            # the model and its tokenizer; generation runs on the batched engine's own context
            self.llm = open_llama(path, n_ctx=256, n_batch=256, n_threads=1, verbose=False)
            self.weights, self.loaded = self._weights(), path  # loaded: the file llama.cpp reads
            file_type = int(self.llm.metadata.get("general.file_type", -1))
            if wants_f16(options.gguf_weights, file_type, llama_cpp.llama_model_n_params(self.llm._model.model)):
                self.llm.close()  # the same metadata and tokenizer, read from the copy
                self.loaded = f16_copy(path)
                self.llm = open_llama(self.loaded, n_ctx=256, n_batch=256, n_threads=1, verbose=False)
                self.weights = f"F16 copy of {self.weights}"
            trained = self.llm.metadata.get(f"{self.llm.metadata.get('general.architecture', 'llama')}.context_length")
            self.window = options.context_window or min(
                int(trained) if str(trained).isdigit() else MAX_CONTEXT, MAX_CONTEXT
            )
            self.engine = BatchedGenerator(self.llm, self.window, self.batch_size, self.threads)
        except Exception as exc:  # noqa: BLE001 - each way a file fails, named in one line
            detail = str(exc).splitlines()[0][:160] if str(exc).strip() else type(exc).__name__
            if type(exc).__module__.startswith("jinja2"):  # llama-cpp-python compiles the file's templates
                raise IfqaError(
                    f"the chat template in the model file fails ({type(exc).__name__}: {detail}); fix the file's "
                    "tokenizer.chat_template",
                    path,
                ) from None
            if not isinstance(exc, (ValueError, RuntimeError, OSError)):
                raise
            raise IfqaError(
                f"llama.cpp cannot load the model ({detail}); a file cut short or damaged: download it again", path
            ) from None
        metadata = self.llm.metadata
        self.template = None if options.completions else metadata.get("tokenizer.chat_template")
        self.chat = bool(self.template)
        self.bos = self._piece(self.llm.token_bos())
        self.eos = self._piece(self.llm.token_eos())
        self.add_bos = metadata.get("tokenizer.ggml.add_bos_token", "true") == "true"
        self._formatter = None

    def _weights(self) -> str:
        """The loaded file's weight type, as llama.cpp names it (Q4_1, F16 ...)."""
        import llama_cpp

        described = ctypes.create_string_buffer(128)
        llama_cpp.llama_model_desc(self.llm._model.model, described, len(described))
        return described.value.decode("utf-8", "replace").rsplit(" ", 1)[-1]

    def _piece(self, token: int) -> str:
        if token is None or token < 0:
            return ""
        return self.llm.detokenize([token], special=True).decode("utf-8", "replace")

    def describe(self) -> dict:
        return {
            "backend": "llamacpp",
            "model": self.name,
            "chat": self.chat,
            "file": self.path.name,
            "weights": self.weights,
        }

    def context_window(self) -> int:
        return self.window

    def count_tokens(self, text: str) -> int:
        return len(self.llm.tokenize(text.encode("utf-8"), add_bos=False, special=False))

    def template_thinks(self) -> bool:
        return template_thinks(self.template)

    def format(self, prompt: str, params: GenerationParams) -> str:
        """The prompt as one user turn in the file's chat template (the thinking switch passed when asked)."""
        if not self.chat:
            return prompt
        if self._formatter is None:
            from llama_cpp.llama_chat_format import Jinja2ChatFormatter

            self._formatter = Jinja2ChatFormatter(self.template, self.eos, self.bos, add_generation_prompt=True)
        try:
            return self._formatter(messages=[{"role": "user", "content": prompt}], **params.template_kwargs()).prompt
        except Exception as exc:  # jinja2's errors, and the template's own raise_exception
            raise IfqaError(
                f"the chat template in the model file fails ({type(exc).__name__}: {str(exc)[:120]}); read the "
                "model with --completions to send prompts as they are",
                self.path,
            ) from None

    def tokens(self, text: str) -> list[int]:
        bos = self.add_bos and not (self.bos and text.startswith(self.bos))
        return self.llm.tokenize(text.encode("utf-8"), add_bos=bos, special=self.chat)

    def complete(self, prompts: Sequence[str], params: GenerationParams) -> list[Completion]:
        """Every prompt of the wave, generated together (``BatchedGenerator``)."""
        texts = [self.format(prompt, params) for prompt in prompts]
        tags = [opened_tag(text) if self.chat else "" for text in texts]
        tokens = [self.tokens(text) for text in texts]
        for ids in tokens:
            if len(ids) + params.max_tokens > self.window:
                raise IfqaError(
                    f"a prompt of {len(ids)} tokens and {params.max_tokens} to generate exceed the model's "
                    f"{self.window}-token window; lower --max-prompt-tokens or --passages (or --max-tokens)",
                    self.path,
                )
        budgets = None
        if params.thinking_budget is not None:
            closing = self.llm.tokenize(closing_for(self.template).encode("utf-8"), add_bos=False, special=True)
            budgets = [BudgetState(self._text, closing, params.thinking_budget, bool(tag)) for tag in tags]
        generated = self.engine.generate(
            tokens,
            max_tokens=params.max_tokens,
            temperature=params.temperature,
            top_p=params.top_p,
            seed=params.seed,
            stop=params.stop,
            budgets=budgets,
        )
        return [
            Completion(tag + g.text, g.prompt_tokens, g.completion_tokens, finish_reason=g.finish_reason)
            for tag, g in zip(tags, generated)
        ]

    def _text(self, ids: list[int]) -> str:
        return self.llm.detokenize(ids, special=True).decode("utf-8", "replace")
