import os
import signal

import pytest

from ifqa.interrupts import Terminated, held_interrupts, raise_lost, sigterm_as_interrupt
from tests.signals import DEFAULTS, signal_handlers


def test_sigterm_raises_terminated_only_inside_the_block():
    before = signal.getsignal(signal.SIGTERM)
    with pytest.raises(Terminated):
        with sigterm_as_interrupt():
            os.kill(os.getpid(), signal.SIGTERM)
            sum(range(1000))  # the handler runs at the next bytecode boundaries
    assert signal.getsignal(signal.SIGTERM) is before


@pytest.mark.parametrize("signum, raised", [(signal.SIGTERM, Terminated), (signal.SIGINT, KeyboardInterrupt)])
def test_held_interrupts_wait_for_the_check(signum, raised, caplog):
    with signal_handlers(DEFAULTS):  # Ctrl-C's default handler, which a test run in the background lacks
        _held_until_checked(signum, raised, caplog)


def _held_until_checked(signum, raised, caplog):
    with sigterm_as_interrupt():
        before = signal.getsignal(signal.SIGINT)
        with held_interrupts() as check, caplog.at_level("WARNING", logger="ifqa"):
            os.kill(os.getpid(), signum)
            done = 0
            for _ in range(1000):  # the unit of work goes on to its end
                done += 1
            assert done == 1000
            assert "stopping after the current step" in caplog.text  # said at once, before the step ends
            with pytest.raises(raised):
                check()
        assert signal.getsignal(signal.SIGINT) is before  # restored


def test_an_ignored_ctrl_c_stays_ignored():
    with signal_handlers({signal.SIGINT: signal.SIG_IGN}):  # as in a background job of a script
        with held_interrupts() as check:
            os.kill(os.getpid(), signal.SIGINT)
            check()  # nothing held
        assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN


@pytest.mark.parametrize("signum, raised", [(signal.SIGTERM, Terminated), (signal.SIGINT, KeyboardInterrupt)])
def test_an_interrupt_lost_where_python_ignores_exceptions_is_raised_after_all(signum, raised):
    """A signal whose exception is raised inside a weakref callback (as one landing in an import's lock
    cleanup is) is printed as ignored by Python and lost; the command still stops with it."""
    import gc
    import weakref

    class Thing:
        pass

    with signal_handlers(DEFAULTS):
        with sigterm_as_interrupt():
            thing = Thing()
            watcher = weakref.ref(thing, lambda _: [os.kill(os.getpid(), signum), *(i for i in range(1000))])
            del thing  # the callback runs here; the exception the signal raises in it is ignored
            gc.collect()
            sum(range(1000))  # the command goes on to its end
            assert watcher() is None
            with pytest.raises(raised):
                raise_lost()
        with sigterm_as_interrupt():
            raise_lost()  # a new command starts with none
