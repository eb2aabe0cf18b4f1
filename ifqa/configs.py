"""One configuration dataclass per component, read from command-line options or YAML by the same
function, and written back as the command that reruns it.

A field's ``metadata`` holds what the command line needs: ``help``, ``choices`` (a tuple, or a
registry: read when an option is parsed), ``flag`` (when the option's name differs from the
field's), ``min``/``max`` (the accepted range), ``multiple`` (a list given by repeating the option),
``parse`` (a list given as one string, e.g. ``0.3,0.7``), ``renamed_from`` (the field's former name:
its key and option still work for a release, and say the new name); docs/ARCHITECTURE.md, "Configuration".
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import math
import re
import shlex
import typing
from collections.abc import Collection, Iterator, Mapping
from typing import Any, TypeVar

from ifqa.errors import IfqaError

T = TypeVar("T")

#: The internal field (a tuple of names) in which ``from_options`` records the options that were given, for
#: a config whose defaults may be filled from elsewhere (a trained reader's card): given at its default is
#: still given, and ``to_args`` writes it.
GIVEN = "given"


def option(default: Any, help: str, **meta: Any) -> Any:
    """A dataclass field that is also a command-line option: ``help`` and the metadata above (a list
    default is copied for each instance)."""
    if isinstance(default, list):
        return dataclasses.field(default_factory=lambda: list(default), metadata={"help": help, **meta})
    return dataclasses.field(default=default, metadata={"help": help, **meta})


@functools.cache
def _hints(cls: type) -> dict[str, Any]:
    """A config's annotations, evaluated once per class (every command's options read them at start-up)."""
    return typing.get_type_hints(cls)


def _kind(cls: type, name: str) -> type:
    """The field's type without ``| None``; ``list`` for any ``list[...]``."""
    hint = _hints(cls)[name]
    args = [a for a in typing.get_args(hint) if a is not type(None)]
    kind = args[0] if args and typing.get_origin(hint) is not list else hint
    return typing.get_origin(kind) or kind


def flag(field: dataclasses.Field) -> str:
    return field.metadata.get("flag") or "--" + field.name.replace("_", "-")


def prefixed(cls: type, prefix: str, what: str) -> type:
    """A dataclass holding ``cls``'s option fields once more, each named ``prefix`` + its name and its
    help led by ``what`` (``--rewrite-thinking`` beside ``--thinking``): a component that reaches a
    second model takes that model's options as they are declared, never a hand-made subset.
    ``unprefixed`` turns its values back into a ``cls``."""
    made = []
    for field in option_fields(cls):
        meta = {k: v for k, v in field.metadata.items() if k not in ("envvar", "renamed_from", "flag")}
        meta["help"] = f"{what}{meta['help'][0].lower()}{meta['help'][1:]}"
        default = dataclasses.field(default=field_default(field), metadata=meta)
        made.append((prefix + field.name, _hints(cls)[field.name], default))
    return dataclasses.make_dataclass(f"{cls.__name__}As{prefix.strip('_').title()}", made)


def unprefixed(config: Any, prefix: str, cls: type[T]) -> T:
    """The ``cls`` whose fields ``config`` holds under ``prefix`` (see ``prefixed``)."""
    return cls(**{f.name: getattr(config, prefix + f.name) for f in option_fields(cls)})


@contextlib.contextmanager
def flags_prefixed(cls: type, prefix: str) -> Iterator[None]:
    """A refusal made while ``unprefixed`` settings are in use names the user's own flags: ``--dtype``
    in its text becomes ``--rewrite-dtype`` (each of ``cls``'s flags, whole words only)."""
    try:
        yield
    except IfqaError as exc:
        flags = sorted((flag(f) for f in option_fields(cls)), key=len, reverse=True)
        words = re.compile(r"(?<![\w-])(" + "|".join(map(re.escape, flags)) + r")(?![\w-])")
        lead = "--" + prefix.replace("_", "-")
        raise IfqaError(words.sub(lambda m: lead + m.group(1)[2:], str(exc))) from None


def option_fields(cls: type) -> list[dataclasses.Field]:
    return [f for f in dataclasses.fields(cls) if not f.metadata.get("internal")]


def field_default(field: dataclasses.Field) -> Any:
    """A field's default value (a fresh one for a default factory)."""
    if field.default is not dataclasses.MISSING:
        return field.default
    if field.default_factory is not dataclasses.MISSING:  # type: ignore[misc]
        return field.default_factory()  # type: ignore[misc]
    return None


def from_options(cls: type[T], options: Mapping[str, Any], where: str | None = None) -> T:
    """Build ``cls`` from a mapping (click's keyword arguments or a YAML entry), checking every value."""
    fields = {f.name: f for f in option_fields(cls)}
    options = _renamed_keys(fields, options, where)
    unknown = set(options) - set(fields)
    if unknown:
        raise IfqaError(f"unknown key(s) {', '.join(sorted(unknown))}; known: {', '.join(fields)}", where)
    values, given = {}, []
    for name, value in options.items():
        field, kind = fields[name], _kind(cls, name)
        label = flag(field) if where is None else name
        if value is None or (value == "" and field_default(field) is None):  # "${UNSET}" in YAML reads as ""
            values[name] = field_default(field)
            continue
        if value != ():  # a repeated option click reports as not repeated is not given
            given.append(name)
        if kind is list:  # repeated options (a tuple, empty when none given), one string to parse, or YAML's list
            if isinstance(value, tuple):
                value = list(value) if value else field_default(field)
            elif isinstance(value, str) and field.metadata.get("parse"):
                value = field.metadata["parse"](value)
            values[name] = value  # the items are checked by the config itself
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
            low, high = field.metadata.get("min"), field.metadata.get("max")
            if low is not None and value < low:
                raise IfqaError(f"{label} must be at least {low}, got {value}", where)
            if high is not None and value > high:
                raise IfqaError(f"{label} must be at most {high}, got {value}", where)
        else:
            value = str(value)
        choices = field.metadata.get("choices")
        if choices is not None and value not in choices:
            raise IfqaError(f"{label} must be one of {', '.join(choices)}, got {value!r}", where)
        values[name] = value
    if GIVEN in {f.name for f in dataclasses.fields(cls)}:  # a config that tells given options from defaults
        values[GIVEN] = tuple(sorted(given))
    try:
        return cls(**values)
    except IfqaError as exc:  # the config's own checks (values that depend on each other), located too
        if where is None:
            raise
        raise IfqaError(str(exc), where) from None


def accepted_keys(cls: type) -> set[str]:
    """The keys a config is read from: its fields' names and their former names (read with a note
    for a release, as renamed flags are), so a YAML row that still says ``rerank_backend`` is not
    refused as unknown by a check that only knows the new name."""
    fields = option_fields(cls)
    return {f.name for f in fields} | {f.metadata["renamed_from"] for f in fields if f.metadata.get("renamed_from")}


def _renamed_keys(fields: dict[str, dataclasses.Field], options: Mapping[str, Any], where: str | None) -> dict:
    """``options`` with a field's former name (``rerank_backend``) read as its name, saying the new one."""
    import logging

    former = {f.metadata["renamed_from"]: name for name, f in fields.items() if f.metadata.get("renamed_from")}
    out = dict(options)
    for old, new in former.items():
        if old in out:
            if new in out and out[new] is not None:
                raise IfqaError(f"give {new} or its former name {old}, not both", where)
            logging.getLogger("ifqa").warning("%s'%s' is now '%s'", f"{where}: " if where else "", old, new)
            out[new] = out.pop(old)
    return out


def changed(config: Any) -> list[tuple[dataclasses.Field, Any]]:
    """``config``'s fields away from their defaults, or given at them (``GIVEN``), in declaration order."""
    fields, given = option_fields(type(config)), getattr(config, GIVEN, ())
    return [
        (f, getattr(config, f.name)) for f in fields if f.name in given or getattr(config, f.name) != field_default(f)
    ]


def to_args(config: Any) -> list[str]:
    """The command-line arguments that rebuild ``config`` (fields at their default are left out, unless given)."""
    args: list[str] = []
    for field, value in changed(config):
        if isinstance(value, bool):  # a boolean's flag turns its default over (given at it: nothing to write)
            args += [flag(field)] if value != field_default(field) else []
        elif isinstance(value, list):
            if field.metadata.get("multiple"):
                args += [part for item in value for part in (flag(field), shlex.quote(str(item)))]
            else:
                args += [flag(field), shlex.quote(",".join(str(item) for item in value))]
        else:
            args += [flag(field), shlex.quote(str(value))]
    return args


def click_options(cls: type, defaults: Mapping[str, Any] | None = None, exclude: Collection[str] = ()):
    """A decorator adding one click option per field (defaults stay None: ``from_options`` fills them);
    ``defaults``: the command's own, shown in its help; ``exclude``: fields the command sets another way."""
    import click

    from ifqa.choices import (  # click's types, for building options alone (configs is read by every component)
        AliasedOption,
        RegistryChoice,
    )

    defaults = defaults or {}

    def decorate(function):
        for field in reversed([f for f in option_fields(cls) if f.name not in exclude]):
            kind, meta = _kind(cls, field.name), field.metadata
            default = defaults.get(field.name, field_default(field))
            shown = "" if default is None or default is False or isinstance(default, list) else f" [default: {default}]"
            help_text = meta.get("help", "") + shown
            if kind is bool:  # a flag that turns the default over (``--no-titles`` for a field True by default)
                turned = not field_default(field)
                option = click.option(
                    flag(field), field.name, flag_value=turned, default=None, help=meta.get("help", "")
                )
            elif kind is list:
                option = click.option(flag(field), field.name, multiple=bool(meta.get("multiple")), help=help_text)
            else:
                choices = meta.get("choices")
                if choices is not None:
                    kind = RegistryChoice(choices) if hasattr(choices, "names") else click.Choice(list(choices))
                renamed = ("--" + meta["renamed_from"].replace("_", "-"),) if meta.get("renamed_from") else ()
                option = click.option(
                    flag(field),
                    *renamed,
                    field.name,
                    cls=AliasedOption,
                    hidden_aliases=renamed,
                    renamed=bool(renamed),
                    type=kind,
                    default=None,
                    help=help_text,
                    envvar=meta.get("envvar"),
                    show_envvar=bool(meta.get("envvar")),
                )
            function = option(function)
        return function

    return decorate


def document_fields(cls: type, config: type) -> None:
    """Append ``config``'s fields, their defaults and help, to ``cls``'s docstring (what ``help(cls)``
    shows for a class that takes them as keywords)."""
    lines = [
        f"    {f.name} = {field_default(f)!r}: {' '.join(f.metadata.get('help', '').split())}"
        for f in option_fields(config)
    ]
    cls.__doc__ = (
        f"{cls.__doc__ or ''}\n    Fields (keywords, or a ``{config.__name__}``):\n\n" + "\n".join(lines) + "\n"
    )
