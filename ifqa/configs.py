"""One configuration dataclass per component, read from command-line options or YAML by the same
function, and written back as the command that reruns it.

A field's ``metadata`` holds what the command line needs: ``help``, ``choices``, ``flag`` (when
the option's name differs from the field's), ``min`` (the smallest accepted number). Click options
are generated from the fields, so the command line, YAML and the command shown in results cannot
drift apart; ``to_args`` writes only the fields that differ from their defaults.
"""

from __future__ import annotations

import dataclasses
import math
import shlex
import typing
from collections.abc import Mapping
from typing import Any, TypeVar

from ifqa.errors import IfqaError

T = TypeVar("T")


def option(default: Any, help: str, **meta: Any) -> Any:
    """A dataclass field that is also a command-line option: ``help`` and the metadata above."""
    return dataclasses.field(default=default, metadata={"help": help, **meta})


def _kind(cls: type, name: str) -> type:
    hint = typing.get_type_hints(cls)[name]
    args = [a for a in typing.get_args(hint) if a is not type(None)]
    return args[0] if args else hint


def flag(field: dataclasses.Field) -> str:
    return field.metadata.get("flag") or "--" + field.name.replace("_", "-")


def option_fields(cls: type) -> list[dataclasses.Field]:
    return [f for f in dataclasses.fields(cls) if not f.metadata.get("internal")]


def _default(field: dataclasses.Field) -> Any:
    if field.default is not dataclasses.MISSING:
        return field.default
    if field.default_factory is not dataclasses.MISSING:  # type: ignore[misc]
        return field.default_factory()  # type: ignore[misc]
    return None


def from_options(cls: type[T], options: Mapping[str, Any], where: str | None = None) -> T:
    """Build ``cls`` from a mapping (click's keyword arguments or a YAML entry), checking every value."""
    fields = {f.name: f for f in option_fields(cls)}
    unknown = set(options) - set(fields)
    if unknown:
        raise IfqaError(f"unknown key(s) {', '.join(sorted(unknown))}; known: {', '.join(fields)}", where)
    values = {}
    for name, value in options.items():
        field, kind = fields[name], _kind(cls, name)
        label = flag(field) if where is None else name
        if value is None or (value == "" and _default(field) is None):  # "${UNSET}" in YAML reads as ""
            values[name] = _default(field)
            continue
        if kind is bool:
            if not isinstance(value, bool):
                raise IfqaError(f"{label} must be true or false, got {value!r}", where)
        elif kind in (int, float):
            if (
                isinstance(value, bool)
                or not isinstance(value, (int, float))
                or (kind is int and not float(value).is_integer())
            ):
                raise IfqaError(f"{label} must be {'an integer' if kind is int else 'a number'}, got {value!r}", where)
            value = kind(value)
            if kind is float and not math.isfinite(value):
                raise IfqaError(f"{label} must be a finite number, got {value!r}", where)
            low = field.metadata.get("min")
            if low is not None and value < low:
                raise IfqaError(f"{label} must be at least {low}, got {value}", where)
            high = field.metadata.get("max")
            if high is not None and value > high:
                raise IfqaError(f"{label} must be at most {high}, got {value}", where)
        else:
            value = str(value)
        choices = field.metadata.get("choices")
        if choices and value not in choices:
            raise IfqaError(f"{label} must be one of {', '.join(choices)}, got {value!r}", where)
        values[name] = value
    return cls(**values)


def to_args(config: Any) -> list[str]:
    """The command-line arguments that rebuild ``config`` (fields at their default are left out)."""
    args: list[str] = []
    for field in option_fields(type(config)):
        value = getattr(config, field.name)
        if value == _default(field):
            continue
        if isinstance(value, bool):  # boolean fields default to False: a flag turns them on
            args.append(flag(field))
        else:
            args += [flag(field), shlex.quote(str(value))]
    return args


def click_options(cls: type, defaults: Mapping[str, Any] | None = None):
    """A decorator adding one click option per field (defaults stay None: ``from_options`` fills them).

    ``defaults`` are a command's own defaults, shown in its help; the command applies them itself.
    """
    import click

    defaults = defaults or {}

    def decorate(function):
        for field in reversed(option_fields(cls)):
            kind, meta = _kind(cls, field.name), field.metadata
            default = defaults.get(field.name, _default(field))
            shown = "" if default is None or default is False else f" [default: {default}]"
            help_text = meta.get("help", "") + shown
            if kind is bool:
                function = click.option(flag(field), field.name, is_flag=True, default=False, help=help_text)(function)
                continue
            kind_ = click.Choice(list(meta["choices"])) if meta.get("choices") else kind
            function = click.option(
                flag(field),
                field.name,
                type=kind_,
                default=None,
                help=help_text,
                envvar=meta.get("envvar"),
                show_envvar=bool(meta.get("envvar")),
            )(function)
        return function

    return decorate
