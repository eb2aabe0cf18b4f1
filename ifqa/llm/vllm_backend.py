"""vLLM's offline engine: the whole batch generated in-process on the user's GPUs.

A ``Backend`` like the others, so prompts, the response cache and the predictions files are the ones
every backend produces. Its waves are decided on purpose: ``batch_size`` is ``--batch-size`` times
``VLLM_WAVE``, so a wave (four batches) hands vLLM's continuous batching hundreds of prompts at once,
which it schedules itself, while a progress bar still moves and each wave's answers are cached as it
ends. vLLM is an optional extra (it needs CUDA): ``pip install 'ifqa[vllm]'``.
"""

from __future__ import annotations

from collections.abc import Sequence

from ifqa.errors import IfqaError
from ifqa.llm.local_thinking import chat_prompt, template_thinks
from ifqa.llm.protocol import Backend, BackendOptions, Completion, Done, GenerationParams

VLLM_WAVE = 16  # a vLLM batch is this many local batches: its scheduler fills the GPU from all of them


class VLLMBackend(Backend):
    """vLLM's offline engine on the local GPUs (tensor parallel over all of them by default)."""

    reads = frozenset({"completions", "context_window"})

    takes_thinking_budget = False  # the offline engine has no budget of its own; a served vLLM takes one

    def __init__(self, model: str, options: BackendOptions = BackendOptions()):
        """Tensor parallel over every visible GPU; ``options.context_window`` caps the model's length
        (None: the model's own); ``options.completions``: plain text, no chat template."""
        import torch
        from vllm import LLM

        self.batch_size = options.batch_size * VLLM_WAVE
        if not torch.cuda.is_available():
            raise IfqaError("--backend vllm needs a CUDA GPU; use --backend hf on CPU")
        self.name, self.gpus = model, torch.cuda.device_count()
        how = {"tensor_parallel_size": self.gpus, "max_model_len": options.context_window, "seed": 0}
        try:
            self.engine = LLM(model=model, disable_log_stats=True, **how)
        except (OSError, ValueError) as exc:
            raise IfqaError(f"vLLM cannot load model {model!r} ({str(exc).splitlines()[0]})") from None
        self.tokenizer = self.engine.get_tokenizer()
        self.chat = not options.completions and bool(self.tokenizer.chat_template)

    def describe(self) -> dict:
        return {"backend": "vllm", "model": self.name, "chat": self.chat, "gpus": self.gpus}

    def template_thinks(self) -> bool:
        return self.chat and template_thinks(self.tokenizer)

    def count_tokens(self, text: str) -> int:
        return len(self.tokenizer(text)["input_ids"])

    def context_window(self) -> int | None:
        return self.engine.llm_engine.model_config.max_model_len

    def complete(self, prompts: Sequence[str], params: GenerationParams, done: Done | None = None) -> list[Completion]:
        from vllm import SamplingParams

        sampling = SamplingParams(
            max_tokens=params.max_tokens,
            temperature=params.temperature,
            top_p=params.top_p if params.temperature > 0 else 1.0,
            stop=list(params.stop) or None,
            seed=params.seed,
        )
        opened = [""] * len(prompts)
        if self.chat:  # the chat template already wrote BOS and friends: tokenize without adding them again
            from vllm.inputs import TokensPrompt

            formatted = [chat_prompt(self.tokenizer, p, params.template_kwargs()) for p in prompts]
            opened = [self.prefill(text) for text in formatted]
            inputs = [
                TokensPrompt(prompt_token_ids=self.tokenizer(text, add_special_tokens=False)["input_ids"])
                for text in formatted
            ]
        else:
            inputs = list(prompts)
        outputs = self.engine.generate(inputs, sampling, use_tqdm=False)  # the engine returns the wave whole
        completions = [
            Completion(
                tag + out.outputs[0].text,
                len(out.prompt_token_ids or []),
                len(out.outputs[0].token_ids),
                finish_reason=out.outputs[0].finish_reason,
            )
            for out, tag in zip(outputs, opened)
        ]
        for i, completion in enumerate(completions if done is not None else []):
            done(i, completion)
        return completions
