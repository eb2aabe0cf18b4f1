"""Reasoning on local models (transformers, vLLM's engine): the chat template's thinking switch, the
opening tag a template writes for the model, and a thinking budget enforced while generating.

A template with a thinking switch (Qwen3's ``enable_thinking``) takes it as a keyword; a template
that ends its generation prompt with ``<think>`` makes the completion start inside the thinking, so
that tag is put back in front of the completion's text (the record shows the whole block, and
``thinking.split`` sees where the thinking starts). The budget works as llama.cpp's does: once a
row has spent ``budget`` tokens inside an open thinking block, the closing tag is forced token by
token and the model goes on to its answer.
"""

from __future__ import annotations

from ifqa.llm.thinking import closes, opens

CLOSING = "\n</think>\n\n"
_TAIL_TOKENS = 8  # tokens decoded to look for a tag just written (tags are a few tokens long)


def chat_prompt(tokenizer, prompt: str, template_kwargs: dict | None = None) -> str:
    """The prompt as one user turn in the model's chat template, the thinking switch passed when asked."""
    return tokenizer.apply_chat_template(
        [{"role": "user", "content": prompt}], tokenize=False, add_generation_prompt=True, **(template_kwargs or {})
    )


def template_thinks(tokenizer) -> bool:
    """The chat template opens a thinking block or knows a thinking switch (a reasoning model's template)."""
    template = getattr(tokenizer, "chat_template", None) or ""
    if not isinstance(template, str):
        return False
    return "<think>" in template or "enable_thinking" in template


class ThinkingBudget:
    """A transformers logits processor: after ``budget`` tokens of thinking, force the closing tag.

    ``inside[row]``: the row's prompt ended inside an open thinking block. State is per ``generate``
    call (a new processor each call)."""

    def __init__(self, tokenizer, budget: int, width: int, inside: list[bool]):
        self.tokenizer, self.budget, self.width = tokenizer, budget, width
        self.forced = tokenizer(CLOSING, add_special_tokens=False)["input_ids"]
        self.start: list[int | None] = [0 if flag else None for flag in inside]  # generated tokens before it opened
        self.position: list[int | None] = [None] * len(inside)  # next forced token, while forcing
        self.done = [False] * len(inside)

    def __call__(self, input_ids, scores):
        import torch

        generated = input_ids.shape[1] - self.width
        for row in range(input_ids.shape[0]):
            if self.done[row]:
                continue
            if self.position[row] is None:
                tail = self.tokenizer.decode(input_ids[row, max(self.width, input_ids.shape[1] - _TAIL_TOKENS) :])
                if closes(tail):
                    self.done[row] = True  # the model closed its thinking itself
                    continue
                if self.start[row] is None:
                    if opens(tail):
                        self.start[row] = generated
                    continue
                if generated - self.start[row] < self.budget:
                    continue
                self.position[row] = 0
            token = self.forced[self.position[row]]
            scores[row] = torch.full_like(scores[row], float("-inf"))
            scores[row, token] = 0.0
            self.position[row] += 1
            if self.position[row] == len(self.forced):
                self.done[row] = True
        return scores
