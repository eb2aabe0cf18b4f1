"""A model ``ifqa train llm`` made is read as it was trained: its card (``ifqa_card.json``) holds the
reader settings its training prompts were built with, and they replace the reader's defaults."""

from __future__ import annotations

import logging
from dataclasses import fields, replace

from ifqa.cards import CARD
from ifqa.configs import field_default, flag
from ifqa.llm.trained import READER_SETTINGS, trained_reader
from ifqa.readers.llm.config import LLMReaderConfig

log = logging.getLogger(__name__)


def trained_card(model: str | None) -> dict | None:
    """The card of a reader ``ifqa train llm`` made, when ``model`` names one (``llm.trained``)."""
    found = trained_reader(model)
    return None if found is None else found.card


def as_trained(config: LLMReaderConfig) -> LLMReaderConfig:
    """``config`` with the trained model's reader settings where an option was not given (``config.given``)
    and is at its default; an option given, even at its default, is kept, with a warning where the model never
    saw prompts made so. The result no longer follows the card (it has been followed), so settling a config
    again changes and says nothing."""
    card = trained_card(config.model) if config.follow_card else None
    if card is None:
        return config
    trained, changes = card["reader"], {"follow_card": False}
    for field in fields(LLMReaderConfig):
        if field.name not in READER_SETTINGS:  # the prompt it was trained on; the backend is the reader's choice
            continue
        value, wanted = getattr(config, field.name), trained[field.name]
        if field.name not in config.given and value == field_default(field):
            changes[field.name] = wanted
        elif value != wanted:
            log.warning("%s %s: %s was trained with %s", flag(field), value, config.model, wanted)
    return replace(config, **changes)


def card_record(config: LLMReaderConfig) -> dict | None:
    """What a predictions manifest keeps of the trained model it read with."""
    found = trained_reader(config.model)
    if found is None:
        return None
    keep = ("base_model", "base_digest", "steps", "step", "dev_em", "lora", "adapter", "training_data")
    return {"path": str(found.folder / CARD), **{k: found.card.get(k) for k in keep}}
