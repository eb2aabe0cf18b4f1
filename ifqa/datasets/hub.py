"""Question sets from the Hugging Face Hub or a local folder in Hub layout (``--questions hf:...``), read
with ``datasets``. The whole spec is the set's name, so a manifest that records it reopens the same
questions; the options (split, config, revision, fields) and the multiple-choice layouts: docs/data.md."""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl

from ifqa.artifacts import Example, QuestionSet
from ifqa.errors import IfqaError
from ifqa.hub_reach import is_offline, offline_if_unreachable, unreachable
from ifqa.io import content_digest
from ifqa.paths import cache_dir
from ifqa.registry import DATASETS

PREFIX = "hf:"
#: Where ifqa looks for each field when the spec names none (IfQA's own names, FlashRAG's, others').
CANDIDATES = {
    "qid": ("idx", "id", "qid", "question_id"),
    "question": ("question", "query", "input"),
    "answers": ("answers", "golden_answers", "answer", "output", "label"),
    "context": ("context", "contexts", "passages", "ctxs"),
    "choices": ("choices", "options"),
    "answer_key": ("answerKey", "answer_key", "answer_idx", "answer"),  # "answer" beside options: MMLU's
}
REQUIRED = ("question", "answers")


@dataclass(frozen=True)
class HubSpec:
    name: str
    split: str | None = None
    config: str | None = None
    revision: str | None = None
    fields: dict[str, str] = field(default_factory=dict)

    @classmethod
    def parse(cls, spec: str, candidates: dict[str, tuple[str, ...]] = CANDIDATES) -> HubSpec:
        """``candidates``: the fields ``fields=`` may map (a question set's by default; a corpus's in
        ``hub_corpus``)."""
        body = spec[len(PREFIX) :]
        name, _, query = body.partition("?")
        if not name:
            raise IfqaError(f"{spec!r}: name a dataset after hf: (hf:OWNER/NAME or hf:PATH)")
        options = dict(parse_qsl(query, keep_blank_values=True))
        unknown = set(options) - {"split", "config", "revision", "fields"}
        if unknown:
            raise IfqaError(f"{spec!r}: unknown option {sorted(unknown)[0]!r}; give split, config, revision or fields")
        mapping = {}
        for pair in filter(None, (options.get("fields") or "").split(",")):
            ours, _, theirs = pair.partition(":")
            if ours not in candidates or not theirs:
                example = "question:query" if "question" in candidates else f"{next(iter(candidates))}:COLUMN"
                raise IfqaError(f"{spec!r}: fields maps {', '.join(candidates)} to columns, as {example}")
            mapping[ours] = theirs
        return cls(name, options.get("split"), options.get("config"), options.get("revision"), mapping)


def is_hub(name: str | os.PathLike | None) -> bool:
    return isinstance(name, str) and name.startswith(PREFIX)


@contextlib.contextmanager
def reading(source: str, spec: HubSpec | None = None) -> Iterator[None]:
    """The one gate every read of an ``hf:`` spec goes through: whatever ``datasets``, pyarrow or the
    file system raise becomes one line naming the user's spec (``source``) and what is wrong, never a
    library's traceback or its wording alone."""
    try:
        yield
    except IfqaError:
        raise
    except Exception as exc:  # noqa: BLE001 - every library error of a read, said once
        raise IfqaError(f"{source}: {_problem(exc, spec)}") from None


def _problem(exc: BaseException, spec: HubSpec | None) -> str:
    """What went wrong in a read of ``spec``, in words a user acts on."""
    name = type(exc).__name__
    cause = exc.__cause__ or exc.__context__
    detail = " ".join(str(exc).split())[:200]
    local = spec is not None and Path(spec.name).expanduser().exists()
    if name == "DataFilesNotFoundError" or (name == "EmptyDatasetError" and local):
        return "its card names data files that are not there (each split's path: must match a file in the folder)"
    if name == "DatasetGenerationError":  # datasets wraps the file's own error
        why = f"{type(cause).__name__}: {' '.join(str(cause).split())[:160]}" if cause else detail
        return f"a data file could not be read ({why}): a split with no rows, or a damaged file"
    if name.startswith("Arrow") or "parquet" in detail.lower():
        return f"a data file is not readable Parquet, damaged or cut short ({detail})"
    if isinstance(exc, ValueError):  # a config the dataset does not have, among others
        return detail
    if isinstance(exc, (FileNotFoundError, ConnectionError, OSError)) and spec is not None and not local:
        if is_offline() or not Path(spec.name).is_absolute():
            reason = unreachable()  # asked once already, before the read: why the client went offline
            why = f"and the Hub cannot be reached: {reason}" if reason else "while offline"
            return (
                f"{spec.name!r} cannot be read ({name}): not a local folder, and not in the Hugging Face cache {why}; "
                f"download it where the Hub is reachable (datasets.load_dataset({spec.name!r})) or point at a local "
                "copy: hf:/path/to/folder"
            )
    return f"cannot be read ({name}: {detail})"


def missing_split_files(folder: Path) -> list[tuple[str, list[str]]]:
    """The splits a local dataset folder's card (README.md's configs) names whose files are not there,
    each with the paths it names: ``datasets`` says only that it cannot infer a format for all splits."""
    import glob

    import yaml

    try:
        text = (folder / "README.md").read_text(encoding="utf-8")
        card = yaml.safe_load(text.split("---")[1]) if text.startswith("---") else {}
    except (OSError, IndexError, yaml.YAMLError):
        return []
    missing = []
    for config in (card or {}).get("configs") or []:
        for entry in (config or {}).get("data_files") or []:
            if isinstance(entry, dict) and entry.get("path"):
                paths = [entry["path"]] if isinstance(entry["path"], str) else list(entry["path"])
                if not any(glob.glob(str(folder / path)) for path in paths):
                    missing.append((str(entry.get("split", "train")), paths))
    return missing


def load_splits(spec: HubSpec, source: str, streaming: bool = False):
    """The ``datasets.DatasetDict`` (all splits) of a spec, through the gate (``reading``)
    (``streaming``: an ``IterableDatasetDict``, read as it is iterated)."""
    datasets = quiet_datasets(spec)
    local = Path(spec.name).expanduser()
    for split, paths in missing_split_files(local) if local.is_dir() else []:
        raise IfqaError(
            f"{source}: the {split} split's files are missing (the card names {', '.join(paths)}; none is in {local})"
        )
    with reading(source, spec):
        if local.exists():
            return datasets.load_dataset(
                str(local), spec.config, cache_dir=str(_local_cache(local)), streaming=streaming
            )
        return datasets.load_dataset(spec.name, spec.config, revision=spec.revision, streaming=streaming)


def quiet_datasets(spec: HubSpec | None = None):
    """``datasets``, its progress bars and notes off, and offline when asked (``HF_HUB_OFFLINE``),
    even where it was imported before the variable was set; offline too, at once, where ``spec`` names
    a Hub dataset and the Hub cannot be reached (``hub_reach``), not after the client's retries."""
    if spec is not None and not Path(spec.name).expanduser().exists():
        offline_if_unreachable()
    import datasets
    from datasets.utils.logging import disable_progress_bar, set_verbosity_error

    disable_progress_bar()
    set_verbosity_error()
    logging.getLogger("datasets").setLevel(logging.CRITICAL)  # its errors are said once, by ``reading``
    if is_offline():
        import huggingface_hub.constants

        datasets.config.HF_HUB_OFFLINE = huggingface_hub.constants.HF_HUB_OFFLINE = True
    return datasets


def _local_cache(folder: Path) -> Path:
    """Where ``datasets`` keeps a local folder's Arrow tables: one place per content (``io.content_digest``
    of its files). ``datasets`` keys its own cache by the folder's name and its card, so two folders
    named alike with the same card, or a folder whose files were replaced, read the first one's rows."""
    digest = content_digest((p for p in folder.rglob("*") if p.is_file()), str(folder.resolve()))
    return cache_dir() / "hf-datasets" / digest[:16]


def choose_split(spec: HubSpec, splits, source: str, preferred: tuple[str, ...] = ("dev", "validation")) -> str:
    """The split asked for, else the first of ``preferred`` the dataset has, else its only one."""
    chosen = spec.split or next((s for s in preferred if s in splits), None)
    if chosen is None and len(splits) == 1:
        chosen = next(iter(splits))
    if chosen not in splits:
        raise IfqaError(f"{source}: no split {chosen!r}; its splits: {', '.join(splits)} (choose with ?split=NAME)")
    return chosen


def find_column(
    spec: HubSpec,
    ours: str,
    columns: list[str],
    source: str,
    candidates: dict[str, tuple[str, ...]] = CANDIDATES,
    required: tuple[str, ...] = REQUIRED,
) -> str | None:
    """The column holding ``ours``: the one ``fields=`` names, else the first candidate the dataset has."""
    if ours in spec.fields:
        if spec.fields[ours] not in columns:
            raise IfqaError(
                f"{source}: fields maps {ours} to {spec.fields[ours]!r}, which the dataset lacks; its columns: "
                f"{', '.join(columns)}"
            )
        return spec.fields[ours]
    found = next((c for c in candidates[ours] if c in columns), None)
    if found is None and ours in required:
        raise IfqaError(
            f"{source}: no column for {ours} (looked for {', '.join(candidates[ours])}); its columns: "
            f"{', '.join(columns)}; name it with ?fields={ours}:COLUMN"
        )
    return found


def _texts(value: Any) -> list[str]:
    if value is None:
        return []
    if isinstance(value, (str, int, float)):  # a number as the answer ("1969", an index) is its text
        return [str(value)]
    if isinstance(value, dict):  # FlashRAG-style {"text": [...]} or SQuAD-style {"text": [...], ...}
        return _texts(value.get("text"))
    return [str(v.get("text", "")) if isinstance(v, dict) else str(v) for v in value]


def load_hub_questions(name: str, dataset: str | None = None) -> QuestionSet:
    """The questions of an ``hf:`` spec, each row mapped to ifqa's fields; ``dataset``: the registered
    setting they are (found from the Hub id when not given: ``hf:Salesforce/FaithEval-counterfactual-v1.0``)."""
    spec = HubSpec.parse(name)
    with reading(name, spec):
        return _questions(spec, name, dataset)


def _questions(spec: HubSpec, name: str, dataset: str | None) -> QuestionSet:
    splits = load_splits(spec, name)
    chosen = choose_split(spec, splits, name)
    data = splits[chosen]
    columns = list(data.column_names)
    multiple = all(find_column(spec, ours, columns, name, required=()) for ours in ("choices", "answer_key"))
    required = ("question",) if multiple else REQUIRED
    mapped = {ours: find_column(spec, ours, columns, name, required=required) for ours in CANDIDATES}
    used = (
        ("qid", "question", "context", "choices", "answer_key")
        if multiple
        else ("qid", "question", "answers", "context")
    )
    examples = []
    first: dict[str, int] = {}
    for number, row in enumerate(data):
        question = row[mapped["question"]]
        if multiple:
            answers, meta = _chosen_option(row[mapped["choices"]], row[mapped["answer_key"]], f"{name}: row {number}")
        else:
            answers, meta = _texts(row[mapped["answers"]]), {}
        if not isinstance(question, str) or not question.strip() or not answers:
            held = ", ".join(mapped[k] for k in ("question",) + (() if multiple else ("answers",)) if mapped[k])
            raise IfqaError(f"{name}: row {number} has no question or no answer in {held}")
        qid = str(row[mapped["qid"]]) if mapped["qid"] else str(number)
        if qid in first:
            raise IfqaError(f"{name}: rows {first[qid]} and {number} have the same question id {qid!r}")
        first[qid] = number
        context = _texts(row[mapped["context"]]) if mapped["context"] else []
        examples.append(Example(qid, question, answers, context, meta))
    if not examples:
        raise IfqaError(f"{name}: split {chosen!r} holds no questions")
    hub = {
        "id": spec.name,
        "config": spec.config,
        "split": chosen,
        "revision": spec.revision,
        "fingerprint": getattr(data, "_fingerprint", None),
        "fields": {k: mapped[k] for k in used if mapped[k]},
    }
    return QuestionSet(name, examples, "mc" if multiple else "qa", dataset or _registered(spec.name), hub)


def _chosen_option(choices: Any, key: Any, where: str) -> tuple[list[str], dict[str, Any]]:
    """``([right option's text], {"choices": [[label, text], ...], "answer_key": label})`` from ARC's
    ``{label, text}`` columns, a list of ``{label, text}`` objects or a list of texts (labelled A, B,
    ..., Z, AA ...: ``multiple_choice.option_labels``); the key is read by ``multiple_choice.answer_label``."""
    from ifqa.eval.multiple_choice import answer_label, option_labels  # the scorer's rules, for these sets alone

    if isinstance(choices, dict):
        pairs = list(zip(choices.get("label") or [], choices.get("text") or []))
    elif isinstance(choices, list) and all(isinstance(c, dict) for c in choices):
        pairs = [(c.get("label"), c.get("text")) for c in choices]
    elif isinstance(choices, list):
        pairs = list(zip(option_labels(len(choices)), choices))
    else:
        raise IfqaError(
            f"{where}: options must be {{label, text}} lists or a list of texts, not {type(choices).__name__}"
        )
    options = [[str(label), str(text)] for label, text in pairs if label is not None and text is not None]
    if len(options) < 2:
        raise IfqaError(f"{where}: fewer than two options")
    labels = [label for label, _ in options]
    if len({label.upper() for label in labels}) < len(labels):  # "a" and "A" are one label to a reader
        raise IfqaError(f"{where}: two options share a label ({', '.join(labels)})")
    label = answer_label(key, [tuple(option) for option in options])
    if label is None:
        raise IfqaError(f"{where}: the answer key {key!r} names none of the options ({', '.join(labels)})")
    return [options[labels.index(label)][1]], {"choices": options, "answer_key": label}


def _registered(hub_id: str) -> str | None:
    """The registered setting published under this Hub id, if any."""
    return next((n for n in DATASETS.names() if getattr(DATASETS.get(n), "hub_id", None) == hub_id), None)
