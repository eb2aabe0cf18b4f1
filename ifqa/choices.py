"""click pieces shared by the command line and the configs it is generated from: a choice read from
a registry when an option is parsed (so entries registered later count), an option whose earlier
spellings still parse (a renamed one says its new name once when used), and a group whose commands
are imported only when one is looked up (so ``ifqa retrieve`` loads retrieval and nothing else)."""

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
    """An option whose earlier spellings still parse, so no one's script breaks, but are left out of
    ``--help`` and messages (``hidden_aliases``). ``renamed``: the aliases are the option's former
    names (``--backend`` for ``--engine``), and a command that is given one says the new name once
    (``announce_renames``) before it runs, which it then does as asked."""

    def __init__(self, param_decls, hidden_aliases: tuple[str, ...] = (), renamed: bool = False, **attrs):
        super().__init__(param_decls, **attrs)
        self.hidden_aliases, self.renamed = hidden_aliases, renamed

    def _shown(self, method, ctx):
        every = self.opts
        self.opts = [name for name in every if name not in self.hidden_aliases]
        try:
            return method(ctx)
        finally:
            self.opts = every

    def get_help_record(self, ctx):
        return self._shown(super().get_help_record, ctx)

    def get_error_hint(self, ctx):
        return self._shown(super().get_error_hint, ctx)


class LazyCommands(dict):
    """A group's ``commands``: a name is known without importing anything (``names``), and its command
    is made (``load(name)`` -> the commands of the module that holds it) the first time it is looked
    up. Listing or iterating every command loads them all (``--help``, the tests' walks).

    What must hold for every command (the output guard, the rename notice) is given once as a
    ``prepare`` function (``each``): applied to the commands loaded so far and to each one loaded later."""

    def __init__(
        self,
        names: Callable[[], Iterable[str]],
        load: Callable[[str], list[click.Command]],
        summaries: dict[str, str] | None = None,
    ):
        super().__init__()
        self._names, self._load, self._prepare = names, load, []
        self.summaries = summaries or {}
        self.listing = False  # while a group's help lists its commands: summaries stand in for unloaded ones

    def each(self, prepare: Callable[[click.Command], None]) -> None:
        self._prepare.append(prepare)
        for command in dict.values(self):
            prepare(command)

    def _ensure(self, name: object) -> None:
        if isinstance(name, str) and not dict.__contains__(self, name) and name in self._names():
            for command in self._load(name):
                if not dict.__contains__(self, command.name):
                    for prepare in self._prepare:
                        prepare(command)
                    dict.__setitem__(self, command.name, command)

    def _ensure_all(self) -> None:
        for name in list(self._names()):
            self._ensure(name)

    def __contains__(self, name: object) -> bool:
        return dict.__contains__(self, name) or (isinstance(name, str) and name in self._names())

    def _listed(self) -> dict[str, click.Command] | None:
        """While listing: every command, an unloaded one as a stand-in holding its line (None otherwise)."""
        if not (self.listing and self.summaries):
            return None
        return {
            name: dict.get(self, name) or click.Command(name, help=self.summaries.get(name, ""))
            for name in self._names()
        }

    def __getitem__(self, name):
        self._ensure(name)
        return dict.__getitem__(self, name)

    def get(self, name, default=None):
        listed = self._listed()
        if listed is not None and name in listed:
            return listed[name]
        self._ensure(name)
        return dict.get(self, name, default)

    def _all(self) -> dict:
        """Every command: stand-ins while listing, else each one loaded."""
        listed = self._listed()
        if listed is None:
            self._ensure_all()
        return {name: dict.__getitem__(self, name) for name in dict.keys(self)} if listed is None else listed

    def __iter__(self):
        return iter(self._all())

    def __len__(self) -> int:
        return len(self._all())

    def keys(self):
        return self._all().keys()

    def values(self):
        return self._all().values()

    def items(self):
        return self._all().items()


def each_command(command: click.Command, prepare: Callable[[click.Command], None]) -> bool:
    """Apply ``prepare`` to every subcommand of a group whose commands load lazily, now and as they
    load (True), or say it is not such a group (False): the walks of ``announce_renames`` and the
    output guard, which would otherwise import every command to reach it."""
    commands = getattr(command, "commands", None)
    if isinstance(commands, LazyCommands):
        commands.each(prepare)
        return True
    return False


def announce_renames(command: click.Command) -> None:
    """Make ``command`` (and every subcommand) say, once, the new name of a renamed option it is given
    by its former name: one mechanism, so an option renamed later is covered by declaring it."""
    if isinstance(command, click.Group):
        if not each_command(command, announce_renames):
            for sub in command.commands.values():
                announce_renames(sub)
        return
    renames = {
        alias: next(o for o in param.opts if o not in param.hidden_aliases)
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
