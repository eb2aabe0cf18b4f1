"""SIGTERM stops a command the way Ctrl-C does, so each long job's interrupt path (finished work
kept for resuming, nothing half-written at the final name) also serves `kill` and job schedulers
that preempt with SIGTERM; a job whose unit of work must not be cut (a training step) holds both
until the unit ends."""

from __future__ import annotations

import contextlib
import signal
from collections.abc import Callable, Iterator


class Terminated(KeyboardInterrupt):
    """Raised in the main thread when the process receives SIGTERM."""


#: The interrupts this process received inside ``sigterm_as_interrupt``: one raised where Python ignores
#: exceptions (a weakref callback inside an import, a ``__del__``) is lost as an exception, not as a
#: request to stop (``raise_lost``).
received: list[int] = []


def _raise(signum, frame) -> None:
    received.append(signum)
    raise Terminated if signum == signal.SIGTERM else KeyboardInterrupt


def raise_lost() -> None:
    """Raise an interrupt that was received but never reached the command (see ``received``)."""
    if received:
        raise Terminated if signal.SIGTERM in received else KeyboardInterrupt


@contextlib.contextmanager
def _handlers(replacements: dict[int, Callable]) -> Iterator[None]:
    """Set these signal handlers for the block, then restore the previous ones; outside a main
    thread, where no handler can be set, nothing changes."""
    previous: dict[int, object] = {}
    try:
        for signum, handler in replacements.items():
            previous[signum] = signal.signal(signum, handler)
    except ValueError:  # not the main thread
        pass
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


@contextlib.contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """Within the block, SIGTERM raises ``Terminated`` (a ``KeyboardInterrupt``) and Ctrl-C (unless
    ignored) ``KeyboardInterrupt``, each noted in ``received``."""
    received.clear()
    replacements: dict[int, Callable] = {signal.SIGTERM: _raise}
    if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
        replacements[signal.SIGINT] = _raise
    with _handlers(replacements):
        yield


@contextlib.contextmanager
def held_interrupts() -> Iterator[Held]:
    """Ctrl-C and SIGTERM (where they would interrupt) wait for the job's next ``check()``, which
    raises them: a job calls it between units of work (a training step), so the state it saves on
    the way out is a whole unit, never one half applied."""
    check = Held()
    interrupting = {signal.SIGINT: (signal.default_int_handler, _raise), signal.SIGTERM: (_raise,)}
    # an ignored or custom handler is left alone
    with _handlers(
        {signum: check.hold for signum, handlers in interrupting.items() if signal.getsignal(signum) in handlers}
    ):
        yield check


class Held:
    """The interrupts held so far: calling it raises the first; ``pending`` tells without raising (the
    ranks of a distributed job agree on stopping before any of them does)."""

    def __init__(self) -> None:
        self.held: list[type[KeyboardInterrupt]] = []

    def hold(self, signum, frame) -> None:
        """Note the interrupt, and say at once that it was heard (a step can take seconds)."""
        if not self.held:
            import logging

            what = "SIGTERM" if signum == signal.SIGTERM else "Ctrl-C"
            logging.getLogger("ifqa").warning("%s: stopping after the current step, which is saved", what)
        self.held.append(Terminated if signum == signal.SIGTERM else KeyboardInterrupt)

    @property
    def pending(self) -> bool:
        return bool(self.held)

    def __call__(self, stop: bool = False) -> None:
        """Raise the held interrupt, or (``stop``: another rank holds one) a plain interrupt."""
        if self.held or stop:
            raise (self.held or [KeyboardInterrupt])[0]
