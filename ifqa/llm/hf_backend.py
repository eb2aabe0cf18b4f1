"""A local causal LM through transformers (a hub id, a folder, or a GGUF file dequantized):
batched generation, the chat template when the model has one, a thinking budget enforced."""

from __future__ import annotations

import contextlib
import importlib.util
import logging
from collections.abc import Sequence

from ifqa.devices import Device, pick_device
from ifqa.errors import IfqaError
from ifqa.llm.gguf_forms import merge_adapter
from ifqa.llm.local_models import is_local_file_model, model_content, model_file
from ifqa.llm.local_thinking import ThinkingBudget, chat_prompt, template_thinks
from ifqa.llm.protocol import TEMPLATE_PROBE, Backend, BackendOptions, Completion, Done, GenerationParams, cut_at_stops
from ifqa.llm.trained import trained_reader
from ifqa.model_options import BATCH_SIZE
from ifqa.models import check_model_location, loading

log = logging.getLogger(__name__)


def local_dtype(device: str) -> str:
    """The precision a local transformers model runs in when none is asked: bfloat16 on a GPU, and on a
    CPU with AMX tiles (Sapphire Rapids and later), where torch's bfloat16 matrix products run on them
    (SmolLM2 reads prompts 3.1x faster than in float32 there: benchmarks/llamacpp_reader.py); float32
    on other CPUs, whose bfloat16 products are emulated and slower than float32."""
    import torch

    device = Device.of(device)
    if device.is_cuda:
        return "bfloat16"
    amx = getattr(torch.cpu, "_is_amx_tile_supported", None)
    return "bfloat16" if device.kind == "cpu" and amx is not None and amx() else "float32"


@contextlib.contextmanager
def _quiet_gguf():
    """transformers' bar over a GGUF file's tensors ignores its own progress switch: its writes to
    ``sys.stderr`` go nowhere while loading (ifqa's log handler holds the real stream, so its lines still
    show); and its advice to load a GGUF file in float32 only (bfloat16 measured 2.5x faster on an AMX
    CPU, benchmarks/llamacpp_reader.py) is not shown to the user."""
    import io

    advice = logging.getLogger("transformers.quantizers.quantizer_gguf")
    level = advice.level
    advice.setLevel(logging.ERROR)
    try:
        with contextlib.redirect_stderr(io.StringIO()):
            yield
    finally:
        advice.setLevel(level)


class HFBackend(Backend):
    """A local causal LM through transformers: batched generation, chat template when the model has one."""

    reads = frozenset({"completions", "device", "dtype"})

    @classmethod
    def from_options(cls, model: str, options: BackendOptions) -> HFBackend:
        dtype = None if options.dtype == "auto" else options.dtype
        return cls(model, options.device, options.batch_size, chat=False if options.completions else None, dtype=dtype)

    def __init__(
        self,
        model: str,
        device: str | None = None,
        batch_size: int = BATCH_SIZE,
        chat: bool | None = None,
        dtype: str | None = None,
    ):
        source, gguf = model, {}
        trained = trained_reader(model)
        adapter = None if trained is None or trained.transformers else trained.checked_adapter()
        if (is_local_file_model(model) or adapter) and not all(map(importlib.util.find_spec, ("gguf", "accelerate"))):
            raise IfqaError("--backend hf reads a GGUF file with gguf and accelerate: pip install 'ifqa[llamacpp]'")
        self.device = pick_device(device)
        if adapter is not None or is_local_file_model(model):  # a GGUF file (demo:smollm2 too): dequantized
            path = adapter[0] if adapter is not None else model_file(model)
            source, gguf = str(path.parent), {"gguf_file": path.name}
        else:
            check_model_location(model)
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()
        with loading(model, "model", source), _quiet_gguf():
            self.tokenizer = AutoTokenizer.from_pretrained(source, **gguf)
            torch_dtype = getattr(torch, dtype or local_dtype(self.device))
            self.model = AutoModelForCausalLM.from_pretrained(source, dtype=torch_dtype, **gguf).to(self.device).eval()
        if adapter is not None:  # the adapter file llama.cpp applies, merged into the dequantized base
            merge_adapter(self.model, adapter[1])
        self.tokenizer.padding_side = "left"
        if self.tokenizer.pad_token is None:
            self.tokenizer.pad_token = self.tokenizer.eos_token
        self.name, self.batch_size = model, batch_size
        self.content = model_content(model)  # in the response cache's key: read once, not at every wave
        self.chat = bool(self.tokenizer.chat_template) if chat is None else chat

    def describe(self) -> dict:
        weights = str(self.model.dtype).removeprefix("torch.")  # in the cache key: other precision, other answers
        described = {"backend": "hf", "model": self.name, "chat": self.chat, "device": self.device, "weights": weights}
        return {**described, **self.content}

    def count_tokens(self, text: str) -> int:
        return len(self.tokenizer(text)["input_ids"])

    def context_window(self) -> int | None:
        return self.model.config.to_dict().get("max_position_embeddings")

    def format_prompt(self, prompt: str, params: GenerationParams) -> str:
        """The text the model reads for ``prompt``: its chat template around it when it has one."""
        return chat_prompt(self.tokenizer, prompt, params.template_kwargs()) if self.chat else prompt

    def template_thinks(self) -> bool:
        return self.chat and template_thinks(self.tokenizer)

    def template_tokens(self, params: GenerationParams) -> int:
        probe = TEMPLATE_PROBE  # +2: a join may tokenize one token longer on each side
        return self.count_tokens(self.format_prompt(probe, params)) - self.count_tokens(probe) + 2

    def complete(self, prompts: Sequence[str], params: GenerationParams, done: Done | None = None) -> list[Completion]:
        import torch
        from transformers import LogitsProcessorList

        out: list[Completion] = []
        eos = self.tokenizer.eos_token_id
        for start in range(0, len(prompts), self.batch_size):
            batch = [self.format_prompt(p, params) for p in prompts[start : start + self.batch_size]]
            opened = [self.prefill(text) for text in batch]
            encoded = self.tokenizer(batch, return_tensors="pt", padding=True, add_special_tokens=not self.chat)
            encoded = encoded.to(self.model.device)  # where the model is: a training loop may have moved it
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
                text = cut_at_stops(tag + self.tokenizer.decode(new, skip_special_tokens=True), params.stop)
                finish = "stop" if ended or produced < len(new) else "length"
                out.append(Completion(text, int(mask.sum()), produced, finish_reason=finish))
                if done is not None:  # a batch's rows end together: each is handed over as the batch ends
                    done(len(out) - 1, out[-1])
        return out  # reasoning tokens are counted by CachedGenerator, with count_tokens, for every backend
