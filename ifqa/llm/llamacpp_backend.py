"""GGUF models in this process through llama.cpp (llama-cpp-python): the runtime CPU users run GGUF
files with, and the one ``demo:smollm2`` is read by. The file says how to prompt it: its chat template
(rendered as transformers renders it) and its context window (at most ``MAX_CONTEXT`` unless
``--context-window`` says otherwise). A wave's prompts are generated together by
``llamacpp_batch.BatchedGenerator`` (benchmarks/llamacpp_reader.py measures it against llama-cpp-python's
own one-by-one reading)."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path

from ifqa.devices import cpu_threads
from ifqa.errors import IfqaError
from ifqa.llm.gguf_forms import merged_copy
from ifqa.llm.llamacpp_batch import BatchedGenerator
from ifqa.llm.local_models import f16_copy, file_digest, model_content, model_file, open_adapter, open_model, wants_f16
from ifqa.llm.local_thinking import BudgetState, closing_for, template_thinks
from ifqa.llm.protocol import TEMPLATE_PROBE, Backend, BackendOptions, Completion, Done, GenerationParams
from ifqa.llm.trained import trained_reader

log = logging.getLogger(__name__)

#: The context allocated when neither the file nor the user says less: a 128k-token window's KV
#: cache would take gigabytes before the first question.
MAX_CONTEXT = 16_384


class LlamaCppBackend(Backend):
    """A GGUF model file (or ``demo:smollm2``) in this process, on llama.cpp."""

    reads = frozenset({"completions", "model_threads", "context_window", "gguf_weights"})

    def __init__(self, model: str, options: BackendOptions = BackendOptions()):
        """Reads ``options``' model_threads (None: ``devices.cpu_threads``), context_window (None: the
        file's, at most ``MAX_CONTEXT``), completions (plain text, no chat template), gguf_weights and
        batch_size (sequences decoded together). Each step's failure is named for what it is."""
        trained = trained_reader(model)  # a trained reader: its base file and adapter, checked against its card
        path, adapter = trained.for_llamacpp() if trained is not None else (model_file(model), None)
        try:
            import llama_cpp  # noqa: F401 - the runtime, or the line saying how to install it
        except ImportError:
            raise IfqaError(
                "--backend llamacpp needs llama-cpp-python, which is not installed: pip install 'ifqa[llamacpp]' "
                "(it builds llama.cpp from source: about 10 minutes on 2 cores)"
            ) from None
        self.name, self.path, self.batch_size = model, path, options.batch_size
        stamps = {f: _stamp(f) for f in (path, adapter) if f}  # as digested: changed before it is loaded, refused
        self.content = model_content(model)  # in the response cache's key: read once, not at every wave
        self.threads = options.model_threads or cpu_threads()
        header = _loaded(path, "its header and vocabulary", lambda: open_model(path, vocab_only=True))
        metadata = header.metadata()
        self.template = None if options.completions else metadata.get("tokenizer.chat_template")
        self.chat = bool(self.template)
        self.bos, self.eos = self._piece(header, header.token_bos()), self._piece(header, header.token_eos())
        self.add_bos = metadata.get("tokenizer.ggml.add_bos_token", "true") == "true"
        self._formatter = None
        self.format("", GenerationParams())  # a template that does not compile: one line now, before any work
        file_type = int(metadata.get("general.file_type", -1))
        copy = wants_f16(options.gguf_weights, file_type, header.n_params())
        header.close()
        base_digest = trained.card["base_digest"] if adapter is not None else None
        if copy and adapter is not None:  # merged once, not added at every product (1.17x: llamacpp_reader.py)
            self.loaded, adapter = merged_copy(path, adapter), None
        else:
            self.loaded = f16_copy(path) if copy else path  # the file llama.cpp reads
        stamps[self.loaded] = stamps.get(self.loaded) or _stamp(self.loaded)
        self.model = _loaded(self.loaded, "the model", lambda: open_model(self.loaded))
        self.weights = f"F16 copy of {file_type_name(file_type)}" if copy else self.model.desc().rsplit(" ", 1)[-1]
        self.weights += " with its adapter merged" if copy and base_digest else ""
        self.adapter = (
            None if adapter is None else _loaded(adapter, "the LoRA adapter", lambda: open_adapter(self.model, adapter))
        )
        for file, stamp in stamps.items():
            if _stamp(file) != stamp:
                raise IfqaError("changed while it was being loaded; rerun once it is whole", file)
        self.window = options.context_window or min(self.model.n_ctx_train() or MAX_CONTEXT, MAX_CONTEXT)
        self.described = {  # what the answers are keyed by: the bytes loaded, digested once, never read again
            "backend": "llamacpp",
            "model": self.name,
            "chat": self.chat,
            "file": self.path.name,
            "weights": self.weights,
            **self.content,
            **({"copy": file_digest(self.loaded)[:16]} if self.loaded != self.path else {}),
            **({"base": base_digest} if base_digest else {}),
        }
        self.engine = BatchedGenerator(self.model, self.window, self.batch_size, self.threads, self.adapter)

    @staticmethod
    def _piece(model, token: int) -> str:
        if token is None or token < 0:
            return ""
        return model.detokenize([token], special=True).decode("utf-8", "replace")

    def describe(self) -> dict:
        return self.described

    def context_window(self) -> int:
        return self.window

    def count_tokens(self, text: str) -> int:
        return len(self.model.tokenize(text.encode("utf-8"), add_bos=False, special=False))

    def template_thinks(self) -> bool:
        return template_thinks(self.template)

    def format(self, prompt: str, params: GenerationParams) -> str:
        """The prompt as one user turn in the file's chat template (the thinking switch passed when asked);
        the template is compiled on first use, so a broken one fails before any prompt is read."""
        if not self.chat:
            return prompt
        try:
            if self._formatter is None:
                from llama_cpp.llama_chat_format import Jinja2ChatFormatter

                self._formatter = Jinja2ChatFormatter(self.template, self.eos, self.bos, add_generation_prompt=True)
            return self._formatter(messages=[{"role": "user", "content": prompt}], **params.template_kwargs()).prompt
        except Exception as exc:  # noqa: BLE001 - jinja2's errors, and the template's own raise_exception
            raise IfqaError(
                f"the chat template in the model file fails ({type(exc).__name__}: {str(exc)[:120]}); read the "
                "model with --completions to send prompts as they are",
                self.path,
            ) from None

    def template_tokens(self, params: GenerationParams) -> int:
        probe = TEMPLATE_PROBE  # +2: a join may tokenize one token longer on each side
        return len(self.tokens(self.format(probe, params))) - self.count_tokens(probe) + 2

    def tokens(self, text: str) -> list[int]:
        bos = self.add_bos and not (self.bos and text.startswith(self.bos))
        return self.model.tokenize(text.encode("utf-8"), add_bos=bos, special=self.chat)

    def complete(self, prompts: Sequence[str], params: GenerationParams, done: Done | None = None) -> list[Completion]:
        """Every prompt of the wave, generated together (``BatchedGenerator``), each handed to ``done``
        the step its sequence ends."""
        texts = [self.format(prompt, params) for prompt in prompts]
        tags = [self.prefill(text) for text in texts]
        tokens = [self.tokens(text) for text in texts]
        for ids in tokens:
            if len(ids) + params.max_tokens > self.window:
                raise IfqaError(
                    f"a prompt of {len(ids)} tokens and {params.max_tokens} to generate exceed the model's "
                    f"{self.window}-token window; raise --context-window, or lower --max-tokens, --passages or "
                    "--max-prompt-tokens",
                    self.path,
                )
        budgets = None
        if params.thinking_budget is not None:
            closing = self.model.tokenize(closing_for(self.template).encode("utf-8"), add_bos=False, special=True)
            budgets = [BudgetState(self._text, closing, params.thinking_budget, bool(tag)) for tag in tags]

        def completion(i: int, g) -> Completion:
            return Completion(tags[i] + g.text, g.prompt_tokens, g.completion_tokens, finish_reason=g.finish_reason)

        report = None if done is None else lambda i, g: done(i, completion(i, g))
        generated = self.engine.generate(tokens, params, budgets, report)
        return [completion(i, g) for i, g in enumerate(generated)]

    def _text(self, ids: list[int]) -> str:
        return self.model.detokenize(ids, special=True).decode("utf-8", "replace")


def file_type_name(file_type: int) -> str:
    """llama.cpp's name of a GGUF file type (Q4_1, F16 ...), as ``LlamaModel.desc`` ends."""
    import gguf

    try:
        return gguf.LlamaFileType(file_type).name.removeprefix("MOSTLY_")
    except ValueError:
        return f"type {file_type}"


def _stamp(path: Path) -> tuple | None:
    """What changes when a file is written or replaced: its inode, size and times (None: it is gone)."""
    try:
        stat = path.stat()
    except OSError:
        return None
    return stat.st_ino, stat.st_size, stat.st_mtime_ns, stat.st_ctime_ns


def _loaded(path: Path, what: str, load):
    """``load()``'s model, or one line naming the file and what failed to load from it."""
    try:
        return load()
    except (ValueError, RuntimeError, OSError) as exc:
        detail = str(exc).splitlines()[0][:160] if str(exc).strip() else type(exc).__name__
        raise IfqaError(
            f"llama.cpp cannot load {what} ({detail}); a file cut short or damaged: download it again", path
        ) from None
