"""Signal handlers set for one test and put back after it. A test run in the background (started with `&` from a
shell without job control) inherits SIGINT ignored, so a test of what Ctrl-C does sets the handlers it assumes."""

import contextlib
import signal
from collections.abc import Iterator

#: what a shell with job control leaves a command: Ctrl-C raises KeyboardInterrupt, SIGTERM ends the process
DEFAULTS = {signal.SIGINT: signal.default_int_handler, signal.SIGTERM: signal.SIG_DFL}


@contextlib.contextmanager
def signal_handlers(handlers: dict) -> Iterator[None]:
    """``handlers`` (signal -> handler) installed inside the block, the ones they replaced put back after."""
    saved = {signum: signal.signal(signum, handler) for signum, handler in handlers.items()}
    try:
        yield
    finally:
        for signum, handler in saved.items():
            signal.signal(signum, handler)
