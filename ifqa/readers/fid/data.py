"""FiD's inputs: ``question: Q title: T context: C`` per passage, tokenized and padded as FiD does."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from ifqa.models import say_once


@dataclass
class FiDSettings:
    n_context: int = 20
    text_maxlength: int = 250
    answer_maxlength: int = 20


def passage_texts(question: str, ctxs: Sequence[dict], n_context: int) -> list[str]:
    """FiD's input strings: ``question: Q title: T context: C`` per passage; short lists are padded."""
    texts = [f"question: {question} title: {c.get('title', '')} context: {c.get('text', '')}" for c in ctxs[:n_context]]
    while len(texts) < n_context:
        texts.append(f"question: {question} title: context:")
    return texts


class Collator:
    """Tokenizes a batch: passages padded to ``text_maxlength`` (as FiD does), targets ending in EOS."""

    def __init__(self, tokenizer, settings: FiDSettings):
        self.tokenizer, self.settings = tokenizer, settings

    def inputs(self, records: Sequence[dict]) -> dict[str, torch.Tensor]:
        texts = [t for r in records for t in passage_texts(r["question"], r["ctxs"], self.settings.n_context)]
        encoded = self.tokenizer(
            texts, max_length=self.settings.text_maxlength, padding="max_length", truncation=True, return_tensors="pt"
        )
        self._check_room(records)
        shape = (len(records), self.settings.n_context, -1)
        return {
            "input_ids": encoded["input_ids"].reshape(shape),
            "attention_mask": encoded["attention_mask"].reshape(shape),
        }

    def _check_room(self, records: Sequence[dict]) -> None:
        """A question that fills ``text_maxlength`` alone leaves its passages out of every input: said once."""
        limit = self.settings.text_maxlength
        prefixes = self.tokenizer([f"question: {r['question']} title:" for r in records])["input_ids"]
        if max(map(len, prefixes), default=0) >= limit:
            say_once(
                f"--text-maxlength {limit} leaves no room for the passages after some questions: FiD reads those "
                "questions without their passages (a longer --text-maxlength reads them)"
            )

    def labels(self, targets: Sequence[str]) -> torch.Tensor:
        eos = self.tokenizer.eos_token_id
        rows = []
        for target in targets:
            ids = self.tokenizer(target, add_special_tokens=True)["input_ids"][: self.settings.answer_maxlength]
            if not ids or ids[-1] != eos:
                ids = ids[: self.settings.answer_maxlength - 1] + [eos]
            rows.append(ids)
        width = max(map(len, rows))
        labels = torch.full((len(rows), width), -100, dtype=torch.long)
        for i, ids in enumerate(rows):
            labels[i, : len(ids)] = torch.tensor(ids)
        return labels
