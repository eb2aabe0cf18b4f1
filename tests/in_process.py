"""Run ``ifqa ...`` inside the test process, as a fresh interpreter would see it.

A CLI subprocess pays the imports again (torch and sentence-transformers: 5 to 30 s on a loaded
2-core machine); most tests check what a command prints, writes and exits with, which needs
``ifqa.cli.main`` and not a new process. What a fresh interpreter gives a command is rebuilt for
each call: its own file descriptors 1 and 2 (so native libraries' output, Java's or ONNX Runtime's,
is captured as a subprocess's would be), ``sys.argv``, the environment and working folder it was
given, an empty stdin, Python's default warning filters printing to stderr, logging not yet
configured, no secrets known to the redactor, no once-per-process warning said yet, the Hub not yet
asked about, and the ``datasets`` cache the environment names; torch's thread count is put back afterwards.
Tests whose point is the process itself (signals, start-up time, what an import pulls in, two
processes at once) start one instead (``tests.conftest.run_cli_process``).
"""

from __future__ import annotations

import contextlib
import io
import logging
import os
import subprocess
import sys
import tempfile
import traceback
import warnings
from pathlib import Path


@contextlib.contextmanager
def _fd_captured(fd: int):
    """Point file descriptor ``fd`` at a temporary file for the block; yields the file."""
    with tempfile.TemporaryFile() as capture:
        saved = os.dup(fd)
        os.dup2(capture.fileno(), fd)
        try:
            yield capture
        finally:
            os.dup2(saved, fd)
            os.close(saved)


def _text_stream(fd: int) -> io.TextIOWrapper:
    """A ``sys.stdout``-like stream writing straight through to ``fd`` (it has a ``.buffer``)."""
    return io.TextIOWrapper(os.fdopen(os.dup(fd), "wb"), encoding="utf-8", errors="replace", write_through=True)


def _fresh_warnings() -> None:
    """The filters an interpreter starts with (no -W), warnings printed to stderr."""
    warnings.resetwarnings()
    for category in (ResourceWarning, ImportWarning, PendingDeprecationWarning, DeprecationWarning):
        warnings.filterwarnings("ignore", category=category)
    warnings.filterwarnings("default", category=DeprecationWarning, module="__main__")

    def show(message, category, filename, lineno, file=None, line=None):
        sys.stderr.write(warnings.formatwarning(message, category, filename, lineno, line))

    warnings.showwarning = show


@contextlib.contextmanager
def no_known_secrets():
    """The redactor's secrets start empty, as in a new process (one call's --api-key must not hide
    what another call leaks; an LLM backend built earlier in this process registered its key for
    the process's lifetime), and are put back afterwards."""
    from ifqa import redact

    saved = set(redact._secrets)
    redact._secrets.clear()
    try:
        yield
    finally:
        redact._secrets.clear()
        redact._secrets.update(saved)


@contextlib.contextmanager
def _torch_threads_kept():
    """A command may set torch's thread count (``--threads``); the next call starts with ours."""
    torch = sys.modules.get("torch")
    threads = torch.get_num_threads() if torch else None
    try:
        yield
    finally:
        if threads is not None:
            torch.set_num_threads(threads)


@contextlib.contextmanager
def _fresh_logging():
    """No handler on the root logger (the command's basicConfig installs its own on this call's
    stderr); every logger's level and the root's handlers put back afterwards."""
    root = logging.getLogger()
    loggers = [root, *(lg for lg in logging.root.manager.loggerDict.values() if isinstance(lg, logging.Logger))]
    levels = {lg: lg.level for lg in loggers}
    handlers = root.handlers[:]
    root.handlers = []
    try:
        yield
    finally:
        for handler in root.handlers:
            with contextlib.suppress(Exception):
                handler.close()
        root.handlers = handlers
        for lg in logging.root.manager.loggerDict.values():
            if isinstance(lg, logging.Logger):
                lg.setLevel(levels.get(lg, logging.NOTSET))
        root.setLevel(levels[root])


@contextlib.contextmanager
def _nothing_said_yet():
    """Warnings said once per process (``ifqa.models.say_once``) are said again, as in a new process."""
    from ifqa.models import say_once

    say_once.cache_clear()
    try:
        yield
    finally:
        say_once.cache_clear()


@contextlib.contextmanager
def _datasets_cache(env: dict | None):
    """``datasets`` reads where its cache is (``HF_DATASETS_CACHE``) once, at import: a fresh interpreter
    reads the environment this call was given (imported here first, under the test process's own)."""
    try:
        import datasets.config as config
    except ImportError:
        yield
        return
    saved = config.HF_DATASETS_CACHE
    wanted = (os.environ if env is None else env).get("HF_DATASETS_CACHE")
    config.HF_DATASETS_CACHE = Path(wanted) if wanted else saved
    try:
        yield
    finally:
        config.HF_DATASETS_CACHE = saved


@contextlib.contextmanager
def _hub_asked_afresh():
    """Whether the Hub can be reached is asked once per process (``ifqa.hub_reach``), and the answer
    turns the hub client (and ``datasets``) offline: each call asks again, and starts online."""
    import huggingface_hub.constants as constants

    from ifqa.hub_reach import unreachable

    datasets_config = sys.modules.get("datasets.config")
    saved = constants.HF_HUB_OFFLINE, getattr(datasets_config, "HF_HUB_OFFLINE", None)
    unreachable.cache_clear()
    try:
        yield
    finally:
        unreachable.cache_clear()
        constants.HF_HUB_OFFLINE = saved[0]
        datasets_config = sys.modules.get("datasets.config")  # imported by the call, perhaps
        if datasets_config is not None:
            datasets_config.HF_HUB_OFFLINE = saved[0] if saved[1] is None else saved[1]


def _exit_status(exc: SystemExit) -> int:
    if exc.code is None:
        return 0
    if isinstance(exc.code, int):
        return exc.code
    print(exc.code, file=sys.stderr)
    return 1


def run_in_process(*args: str | Path, cwd: Path | None = None, env: dict | None = None) -> subprocess.CompletedProcess:
    """``python -m ifqa.cli ARGS`` with ``cwd`` and ``env``, in this process."""
    from ifqa.cli import main

    argv = [str(a) for a in args]
    saved_env, saved_cwd = dict(os.environ), os.getcwd()
    saved_streams = sys.stdin, sys.stdout, sys.stderr, sys.argv
    sys.stdout.flush()
    sys.stderr.flush()
    with (
        _fd_captured(1) as out,
        _fd_captured(2) as err,
        warnings.catch_warnings(),
        _fresh_logging(),
        no_known_secrets(),
        _torch_threads_kept(),
        _nothing_said_yet(),
        _datasets_cache(env),
        _hub_asked_afresh(),
    ):
        sys.stdout, sys.stderr = _text_stream(1), _text_stream(2)
        sys.stdin, sys.argv = io.StringIO(""), [str(Path(main.__code__.co_filename).with_name("__main__.py")), *argv]
        try:
            if env is not None:
                os.environ.clear()
                os.environ.update(env)
            if cwd is not None:
                os.chdir(cwd)
            _fresh_warnings()
            try:
                main(argv)
                status = 0
            except SystemExit as exc:
                status = _exit_status(exc)
            except BaseException:  # what a fresh interpreter prints for an uncaught exception
                traceback.print_exc()
                status = 1
        finally:
            for stream in (sys.stdout, sys.stderr):
                with contextlib.suppress(Exception):
                    stream.close()
            sys.stdin, sys.stdout, sys.stderr, sys.argv = saved_streams
            os.chdir(saved_cwd)
            os.environ.clear()
            os.environ.update(saved_env)
        streams = []
        for capture in (out, err):
            capture.seek(0)
            streams.append(capture.read().decode("utf-8", errors="replace"))
    return subprocess.CompletedProcess(["ifqa", *argv], status, *streams)
