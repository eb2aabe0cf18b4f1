"""A toy LLM backend: one ``Backend`` subclass, registered by one line in a test (tests/llm/test_protocol.py).
It answers every prompt with the last word of its question, shouting, and takes no thinking budget."""

from __future__ import annotations

from ifqa.llm.protocol import Backend, BackendOptions, Completion


class ShoutingBackend(Backend):
    takes_thinking_budget = False

    @classmethod
    def from_options(cls, model: str, options: BackendOptions) -> ShoutingBackend:
        backend = cls()
        backend.name, backend.batch_size = model, options.batch_size
        return backend

    def complete(self, prompts, params, done=None):
        answers = []
        for prompt in prompts:
            question = [line for line in prompt.splitlines() if line.startswith("Question:")][-1]
            answers.append(
                Completion(question.rstrip("?").split()[-1].upper(), len(prompt.split()), 1, finish_reason="stop")
            )
        return answers

    def describe(self) -> dict:
        return {"backend": "shouting", "model": self.name, "chat": False}
