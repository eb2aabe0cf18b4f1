"""A click choice read from a registry when an option is parsed, so entries registered later count."""

from __future__ import annotations

import click


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
