"""SIGTERM stops a command the way Ctrl-C does, so each long job's interrupt path (finished work
kept for resuming, nothing half-written at the final name) also serves `kill` and job schedulers
that preempt with SIGTERM."""

from __future__ import annotations

import contextlib
import signal
from typing import Callable, Iterator


class Terminated(KeyboardInterrupt):
    """Raised in the main thread when the process receives SIGTERM."""


def _raise_terminated(signum, frame) -> None:
    raise Terminated


@contextlib.contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """Within the block, SIGTERM raises ``Terminated`` (a ``KeyboardInterrupt``); outside a main
    thread, where no handler can be set, nothing changes."""
    try:
        previous = signal.signal(signal.SIGTERM, _raise_terminated)
    except ValueError:  # not the main thread
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


@contextlib.contextmanager
def held_interrupts() -> Iterator[Callable[[], None]]:
    """Ctrl-C and SIGTERM (where they would interrupt) wait for the job's next ``check()``, which
    raises them: a job calls it between units of work (a training step), so the state it saves on
    the way out is a whole unit, never one half applied."""
    held: list[type[KeyboardInterrupt]] = []
    previous: dict[int, object] = {}

    def hold(signum, frame) -> None:
        held.append(Terminated if signum == signal.SIGTERM else KeyboardInterrupt)

    def check() -> None:
        if held:
            raise held[0]

    try:
        for signum, interrupting in ((signal.SIGINT, signal.default_int_handler), (signal.SIGTERM, _raise_terminated)):
            if signal.getsignal(signum) is interrupting:  # an ignored or custom handler is left alone
                previous[signum] = signal.signal(signum, hold)
    except ValueError:  # not the main thread
        pass
    try:
        yield check
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
