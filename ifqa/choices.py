"""click pieces shared by the command line and the configs it is generated from."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable

import click

log = logging.getLogger("ifqa")


class RegistryChoice(click.Choice):
    """A choice among ``registry.names()`` (a ``Registry``, or any object with ``names()``)."""

    def __init__(self, registry):
        self.registry = registry
        super().__init__(registry.names())

    @property
    def choices(self):  # type: ignore[override]
        return tuple(self.registry.names())

    @choices.setter
    def choices(self, value) -> None:
        pass


class AliasedOption(click.Option):
    """An option whose earlier spellings (``hidden_aliases``) still parse but are left out of ``--help``
    and messages; ``renamed``: they are its former names, said once when used (``announce_renames``)."""

    def __init__(self, param_decls, hidden_aliases: tuple[str, ...] = (), renamed: bool = False, **attrs):
        super().__init__(param_decls, **attrs)
        self.hidden_aliases, self.renamed = hidden_aliases, renamed
        self.opts = [name for name in self.opts if name not in hidden_aliases]  # what help and messages show

    def add_to_parser(self, parser, ctx):  # the parser alone reads the aliases too
        shown, self.opts = self.opts, [*self.opts, *self.hidden_aliases]
        try:
            return super().add_to_parser(parser, ctx)
        finally:
            self.opts = shown


class LazyGroup(click.Group):
    """A group whose commands are imported when one is looked up (``names()`` lists them, ``load(name)``
    makes them; ``summaries``: their lines, for a page ``listing`` them); what must hold for every command
    (the output guard, the device check, the rename notice) is given once (``each``) and applied as each loads."""

    def __init__(self, *args, names: Callable[[], Iterable[str]], load, summaries: dict | None = None, **kwargs):
        super().__init__(*args, **kwargs)
        self._names, self._load, self._prepare = names, load, []
        self.summaries, self.listing = summaries or {}, False

    def each(self, prepare: Callable[[click.Command], None]) -> None:
        self._prepare.append(prepare)
        for command in self.commands.values():
            prepare(command)

    def list_commands(self, ctx) -> list[str]:
        return sorted({*self._names(), *self.commands})

    def get_command(self, ctx, name: str) -> click.Command | None:
        if name not in self.commands and name in self._names():
            if self.listing and self.summaries:  # a page listing commands: a stand-in holding its line
                return click.Command(name, help=self.summaries.get(name, ""))
            for command in self._load(name):
                for prepare in self._prepare:
                    prepare(command)
                self.commands.setdefault(command.name, command)
        return self.commands.get(name)


def subcommands(group: click.Command) -> dict[str, click.Command]:
    """A group's commands by name (a lazy group's loaded as they are named); {} for a command."""
    if not isinstance(group, click.Group):
        return {}
    return {name: group.get_command(None, name) for name in group.list_commands(None)}


def each_command(command: click.Command, prepare: Callable[[click.Command], None]) -> None:
    """Apply ``prepare`` to every subcommand of a group, now and (a lazy group's) as they load, without
    importing the ones not loaded yet: the walks of ``announce_renames`` and the output guard."""
    if isinstance(command, LazyGroup):
        command.each(prepare)
    else:
        for sub in subcommands(command).values():
            prepare(sub)


def announce_renames(command: click.Command) -> None:
    """Make ``command`` (and every subcommand) say, once, the new name of a renamed option it is given
    by its former name: one mechanism, so an option renamed later is covered by declaring it."""
    if isinstance(command, click.Group):
        each_command(command, announce_renames)
        return
    renames = {
        alias: param.opts[0]
        for param in command.params
        if isinstance(param, AliasedOption) and param.renamed
        for alias in param.hidden_aliases
    }
    if not renames or getattr(command, "announces_renames", False):
        return
    parse_args = command.parse_args

    def announcing(ctx, args):
        said = set()
        for arg in args[: args.index("--") if "--" in args else len(args)]:
            old = arg.partition("=")[0]
            if old in renames and old not in said:
                said.add(old)
                log.warning("%s is now %s (the old name works for this release)", old, renames[old])
        return parse_args(ctx, args)

    command.parse_args = announcing  # type: ignore[method-assign]
    command.announces_renames = True  # type: ignore[attr-defined]
