"""click pieces shared by the command line and the configs it is generated from: a choice read from
a registry when an option is parsed (so entries registered later count), and an option whose earlier
spellings still parse (a renamed one says its new name once when used)."""

from __future__ import annotations

import logging

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


def announce_renames(command: click.Command) -> None:
    """Make ``command`` (and every subcommand) say, once, the new name of a renamed option it is given
    by its former name: one mechanism, so an option renamed later is covered by declaring it."""
    if isinstance(command, click.Group):
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
