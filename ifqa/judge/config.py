"""The judge's settings: ``ModelAccess`` (which model, where, reasoning) plus its own few."""

from __future__ import annotations

from dataclasses import dataclass

from ifqa.configs import option
from ifqa.llm.config import ModelAccess

PLAIN_MAX_TOKENS = 256  # a reason line and a verdict line


@dataclass(frozen=True)
class JudgeConfig(ModelAccess):
    PURPOSE = "the judge (--model)"

    max_tokens: int | None = option(
        None, f"Tokens the judge may write (default {PLAIN_MAX_TOKENS}, more for a model that thinks).", min=1
    )
    prompts_dir: str | None = option(None, "Folder holding judge.txt (default: the installed prompts).")
    seed: int = option(0, "Seed sent with each request.")
