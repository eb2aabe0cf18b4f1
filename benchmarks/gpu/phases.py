"""``python benchmarks/gpu/phases.py OUT ARGS``: ``ifqa ARGS`` with the parts of its start-up stamped
into OUT (JSON, seconds since the process began): the interpreter, each heavy library imported, the
model loaded, CUDA initialised, the first batch prepared (worker processes started) and run, the
end. The suite runs each command's start-up run through it, so start-up is reported by its parts."""

from __future__ import annotations

import atexit
import functools
import importlib.abc
import importlib.machinery
import json
import os
import sys
import time
from pathlib import Path

HEAVY = (
    "torch",
    "transformers",
    "transformers.modeling_utils",
    "sentence_transformers",
    "faiss",
    "numpy",
    "tokenizers",
)


def _since_start() -> float:
    """Seconds since this process began (the kernel's record of its start), on ``perf_counter``'s clock."""
    with open("/proc/self/stat") as handle:
        fields = handle.read().rsplit(")", 1)[1].split()
    with open("/proc/uptime") as handle:
        uptime = float(handle.read().split()[0])
    return uptime - int(fields[19]) / os.sysconf("SC_CLK_TCK")


ZERO = time.perf_counter() - _since_start()
STAMPS: dict[str, float] = {}


def mark(name: str) -> None:
    STAMPS.setdefault(name, round(time.perf_counter() - ZERO, 3))


class _Imports(importlib.abc.MetaPathFinder):
    """Stamps when each heavy library has finished importing."""

    def find_spec(self, name, path, target=None):
        if name not in HEAVY:
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None or spec.loader is None:
            return spec
        execute = spec.loader.exec_module

        def exec_module(module):
            execute(module)
            mark(f"{name} imported")
            if name == "torch":
                _wrap(module.cuda, "_lazy_init", "CUDA initialised")

        spec.loader.exec_module = exec_module
        return spec


def _wrap(owner, attribute: str, name: str, first_call: bool = False) -> None:
    """Stamp ``name`` when ``owner.attribute`` returns (its first call: ``first_call``)."""
    original = getattr(owner, attribute)

    @functools.wraps(original)
    def wrapped(*args, **kwargs):
        result = original(*args, **kwargs)
        mark(name)
        return result

    setattr(owner, attribute, wrapped)


def _first_item(feed):
    @functools.wraps(feed)
    def wrapped(*args, **kwargs):
        for item in feed(*args, **kwargs):
            mark("first batch prepared")
            yield item

    return wrapped


def install(out: Path) -> None:
    sys.meta_path.insert(0, _Imports())
    mark("interpreter started")
    from ifqa import feeding
    from ifqa.retrieval import encoders, rerank

    _wrap(encoders, "load_encoder", "model loaded")
    _wrap(rerank, "load_reranker", "model loaded")
    feeding.feed = _first_item(feeding.feed)
    for encoder in (encoders.SentenceEncoder, encoders.DPREncoder):
        _wrap(encoder, "passage_vectors", "first batch run")
    _wrap(rerank.CrossEncoderReranker, "_logits", "first batch run")
    atexit.register(lambda: out.write_text(json.dumps({**STAMPS, "end": round(time.perf_counter() - ZERO, 3)})))


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    install(Path(sys.argv[1]))
    from ifqa.cli import run

    sys.argv = ["ifqa", *sys.argv[2:]]
    run()  # as the `ifqa` program runs, so also as it ends: without tearing its modules down one by one
