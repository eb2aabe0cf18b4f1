"""The public API's argument checks, in one layer (docs/ARCHITECTURE.md, "Arguments"): a check takes
``(name, value)`` and returns the value to use (``answers="x"`` becomes ``["x"]``), or raises a
``TypeError``/``ValueError`` naming the argument, never a silent answer (``batch_search("a string")``)."""

from __future__ import annotations

import functools
import inspect
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from ifqa.artifacts import Example, QuestionSet, as_question_set
from ifqa.datasets import QuestionSource
from ifqa.devices import pick_device
from ifqa.errors import IfqaError
from ifqa.io import nfc

Check = Callable[[str, Any], Any]


def checked(**checks: Check) -> Callable:
    """Check the named arguments of the decorated function before it runs (``__checked__`` maps
    them to their checks, so a test can find public functions that check nothing)."""

    def decorate(function: Callable) -> Callable:
        signature = inspect.signature(function)
        unknown = set(checks) - set(signature.parameters)
        if unknown:
            raise TypeError(f"{function.__qualname__} has no parameter {sorted(unknown)}")

        @functools.wraps(function)
        def wrapper(*args, **kwargs):
            bound = signature.bind(*args, **kwargs)
            for name, check in checks.items():
                if name in bound.arguments:
                    bound.arguments[name] = check(name, bound.arguments[name])
            return function(*bound.args, **bound.kwargs)

        wrapper.__checked__ = dict(checks)  # type: ignore[attr-defined]
        return wrapper

    return decorate


def _kind(value: Any) -> str:
    return type(value).__name__


def count(name: str, value: Any) -> int:
    """A whole number of at least 1 (``k``, ``depth``, ``threads``); a bool is not one."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int of at least 1, not {_kind(value)} {value!r}")
    if value < 1:
        raise ValueError(f"{name} must be at least 1, not {value}")
    return value


def optional(check: Check) -> Check:
    """``check``, or None (the default)."""

    def check_or_none(name: str, value: Any) -> Any:
        return None if value is None else check(name, value)

    check_or_none.inner = check  # type: ignore[attr-defined]
    return check_or_none


def _unicode(name: str, value: str) -> str:
    """``value`` as text every tokenizer and file can hold: a lone surrogate (``'\\udcff'``, what
    ``os.fsdecode`` makes of undecodable bytes) is refused here, as the command line refuses it."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ValueError(f"{name} holds {value[exc.start]!r} at {exc.start}, not valid Unicode text") from None
    return value


def text(name: str, value: Any) -> str:
    """A question or answer: a non-empty string (not bytes, not None) of valid Unicode."""
    if not isinstance(value, str):
        raise TypeError(f"{name} must be a str, not {_kind(value)}")
    if not value.strip():
        raise ValueError(f"{name} is empty")
    return nfc(_unicode(name, value))


def texts(name: str, value: Any) -> list[str]:
    """A list of strings; a lone string is refused (it would be read as a list of its letters)."""
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence):
        raise TypeError(f"{name} must be a list of str, not {_kind(value)} (for one, pass [{name[:-1] or name}])")
    return [text(f"{name}[{i}]", item) for i, item in enumerate(value)]


def answers(name: str, value: Any) -> list[str]:
    """Reference answers: a list of strings, or one string as the only answer."""
    if isinstance(value, str):
        return [_unicode(name, value)]
    if isinstance(value, bytes) or not isinstance(value, Sequence):
        raise TypeError(f"{name} must be a list of str (or one str), not {_kind(value)}")
    if not value:
        raise ValueError(f"{name} is empty: give at least one reference answer")
    for i, item in enumerate(value):
        if not isinstance(item, str):
            raise TypeError(f"{name}[{i}] must be a str, not {_kind(item)}")
        _unicode(f"{name}[{i}]", item)
    return list(value)


def prediction(name: str, value: Any) -> str:
    """A predicted answer: a string, possibly empty (an abstention scores 0)."""
    if not isinstance(value, str):
        raise TypeError(f"{name} must be a str, not {_kind(value)}")
    return _unicode(name, value)


def flag(name: str, value: Any) -> bool:
    """A switch: True or False (a string such as "no" would be true)."""
    if not isinstance(value, bool):
        raise TypeError(f"{name} must be True or False, not {_kind(value)} {value!r}")
    return value


def position(name: str, value: Any) -> int:
    """An index into a collection: an int (range checked by the caller, which knows the size)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int, not {_kind(value)} {value!r}")
    return value


def path_like(name: str, value: Any) -> str | os.PathLike:
    if not isinstance(value, (str, os.PathLike)) or not str(value).strip():
        raise TypeError(f"{name} must be a path or a name (str), not {_kind(value)} {value!r}")
    return value


def device(name: str, value: Any) -> str | None:
    """None (the GPU when present), or a device this machine has."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise TypeError(f"{name} must be a str such as 'cpu' or 'cuda', not {_kind(value)}")
    return pick_device(value)


def questions(name: str, value: Any):
    """A ``QuestionSet``, a list of ``Example``s, or a questions file's path (loaded here)."""
    if isinstance(value, QuestionSet):
        return unique_qids(name, value)
    if isinstance(value, (str, os.PathLike)):
        if not Path(value).is_file():
            raise IfqaError(f"{name}: no such questions file (a dataset is load_questions('demo', 'dev'))", value)
        return QuestionSource(file=str(value)).load()
    if not isinstance(value, Sequence) or any(not isinstance(item, Example) for item in value):
        first = next(iter(value), None) if isinstance(value, Sequence) else value
        raise TypeError(
            f"{name} must be a QuestionSet, a list of Example or a questions file, not {_kind(value)}"
            + (f" of {_kind(first)}" if isinstance(value, Sequence) and first is not None else "")
        )
    return unique_qids(name, as_question_set(value))


def unique_qids(name: str, question_set):
    """Each question once: a repeated id would be scored twice (and its records matched to either)."""
    seen: set = set()
    for example in question_set.examples:
        if example.qid in seen:
            raise ValueError(f"{name}: question id {example.qid!r} appears more than once")
        seen.add(example.qid)
    return question_set


def records(name: str, value: Any) -> str | os.PathLike | list:
    """A file's path, or records (mappings) as read from one."""
    if isinstance(value, (str, os.PathLike)):
        return value
    if isinstance(value, (bytes, Mapping)) or not isinstance(value, Iterable):
        raise TypeError(f"{name} must be a file's path or a list of records, not {_kind(value)}")
    items = list(value)
    seen: set = set()
    for i, item in enumerate(items):
        if not isinstance(item, Mapping):
            raise TypeError(f"{name}[{i}] must be a record (dict), not {_kind(item)}")
        if "qid" in item:
            if str(item["qid"]) in seen:
                raise ValueError(f"{name}[{i}]: question id {item['qid']!r} appears more than once")
            seen.add(str(item["qid"]))
    return items


def shareable(name: str, value: Any):
    """Questions (a ``QuestionSet`` or a list of ``Example``) or what ``records`` takes (a run or
    predictions file's path, or records)."""
    if isinstance(value, QuestionSet) or (
        isinstance(value, Sequence) and value and all(isinstance(item, Example) for item in value)
    ):
        return questions(name, value)
    if isinstance(value, (str, os.PathLike)) and not Path(value).is_file():
        raise IfqaError(f"{name}: no such file (a run or predictions JSONL)", value)
    return records(name, value)


def one_of(*allowed: type) -> Check:
    """An instance of one of ``allowed`` (wrap in ``optional`` to allow None)."""

    def check(name: str, value: Any) -> Any:
        if not isinstance(value, allowed):
            names = " or ".join(kind.__name__ for kind in allowed)
            raise TypeError(f"{name} must be {names}, not {_kind(value)}")
        return value

    return check
