"""Reasoning on local models (transformers, vLLM's engine, llama.cpp): the chat template's thinking
switch, the opening tag a template writes for the model (put back in front of the completion, so
``thinking.split`` sees where the thinking starts), and a thinking budget enforced as llama.cpp's is
(``BudgetState``)."""

from __future__ import annotations

from ifqa.llm.thinking import closes, opens

CLOSING = "\n</think>\n\n"
#: The text a budget forces to close a thinking block, by the opening a template uses (else ``CLOSING``).
CLOSINGS = {"[THINK]": "\n[/THINK]\n\n", "<|channel|>analysis": "<|end|><|start|>assistant<|channel|>final<|message|>"}


def closing_for(template: str | None) -> str:
    """What closes a thinking block in this chat template's model (``</think>`` unless it says otherwise)."""
    return next((text for mark, text in CLOSINGS.items() if template and mark in template), CLOSING)


_TAIL_TOKENS = 8  # tokens decoded to look for a tag just written (tags are a few tokens long)


def chat_prompt(tokenizer, prompt: str, template_kwargs: dict | None = None) -> str:
    """The prompt as one user turn in the model's chat template, the thinking switch passed when asked."""
    return tokenizer.apply_chat_template(
        [{"role": "user", "content": prompt}], tokenize=False, add_generation_prompt=True, **(template_kwargs or {})
    )


#: What a reasoning model's chat template holds: a thinking tag it opens (``thinking.THINKING_TAGS``'
#: openings as written), or the thinking switch.
TEMPLATE_MARKS = ("<think>", "[THINK]", "<|channel|>analysis", "enable_thinking")


def template_thinks(template) -> bool:
    """A chat template (its text, or a tokenizer holding one) that opens a thinking block or knows a
    thinking switch: a reasoning model's template."""
    text = getattr(template, "chat_template", template) or ""
    return isinstance(text, str) and any(mark in text for mark in TEMPLATE_MARKS)


class BudgetState:
    """One generated sequence's thinking budget, for any runtime: once ``budget`` tokens have been
    generated inside an open thinking block, the closing tag's tokens (``forced``) are forced one a
    step, and the model goes on to its answer. ``decode`` turns token ids into text (tags are found
    in the last few tokens decoded); ``inside``: the prompt ended inside an open thinking block."""

    def __init__(self, decode, forced: list[int], budget: int, inside: bool):
        self.decode, self.forced, self.budget = decode, forced, budget
        self.start: int | None = 0 if inside else None  # generated tokens before the block opened
        self.position: int | None = None  # next forced token, while forcing
        self.done = False

    def next_forced(self, generated) -> int | None:
        """The token to force after ``generated`` (the ids generated so far), or None."""
        if self.done:
            return None
        if self.position is None:
            tail = self.decode(list(generated[-_TAIL_TOKENS:]))
            if closes(tail):
                self.done = True  # the model closed its thinking itself
                return None
            if self.start is None:
                if opens(tail):
                    self.start = len(generated)
                return None
            if len(generated) - self.start < self.budget:
                return None
            self.position = 0
        token = self.forced[self.position]
        self.position += 1
        self.done = self.position == len(self.forced)
        return token


class ThinkingBudget:
    """A transformers logits processor: after ``budget`` tokens of thinking, force the closing tag
    (``BudgetState`` per row; a new processor each ``generate`` call)."""

    def __init__(self, tokenizer, budget: int, width: int, inside: list[bool]):
        template = getattr(tokenizer, "chat_template", None)
        forced = tokenizer(closing_for(template if isinstance(template, str) else None), add_special_tokens=False)[
            "input_ids"
        ]
        self.width = width
        self.rows = [BudgetState(tokenizer.decode, forced, budget, flag) for flag in inside]

    def __call__(self, input_ids, scores):
        import torch

        for row, state in enumerate(self.rows):
            token = state.next_forced(input_ids[row, self.width :].tolist())
            if token is not None:
                scores[row] = torch.full_like(scores[row], float("-inf"))
                scores[row, token] = 0.0
        return scores
