"""A machine with GPUs, as torch.cuda answers for it, for testing the GPU paths on a CPU: it records
which device is current, which stream each event is recorded on and what is pinned, and keeps the
CUDA rule that matters here: an event recorded without a stream lands on the *current* device's
stream. Tensors stay on the CPU; ``on_gpu`` makes one report a GPU as its device.

It is as strict as torch: every patched function first reads its device argument with torch's own
CPU-side rule (``torch.cuda._utils._get_device_index``, with the ``optional`` torch passes there),
so ``torch.cuda.set_device("cuda")`` fails here as it fails on a GPU, and an index past the devices
is refused. ``COVERED`` names every ``torch.cuda`` function the fake stands in for: a test walks
ifqa/ and fails on a call it does not cover. Moving a tensor to ``cuda`` still fails with torch's own
"not compiled with CUDA": the point a command reaches the device."""

from __future__ import annotations

import contextlib
import functools
from dataclasses import dataclass, field
from types import SimpleNamespace

import torch
from torch.cuda._utils import _get_device_index

#: The torch.cuda functions and classes the fake replaces (what ifqa may call on a GPU machine).
COVERED = frozenset(
    {
        "is_available",
        "device_count",
        "current_device",
        "get_device_properties",
        "get_device_name",
        "Event",
        "device",
        "stream",
        "current_stream",
        "set_device",
        "empty_cache",
        "get_rng_state",
        "set_rng_state",
        "synchronize",
    }
)


@dataclass(frozen=True)
class FakeStream:
    device: int


@dataclass
class FakeCuda:
    count: int = 2
    major: int = 8  # compute capability: 8.0+ runs bf16 natively, 7.x (V100, T4) emulates it
    current: int = 0
    events: list = field(default_factory=list)  # the stream each event was recorded on
    entered: list = field(default_factory=list)  # devices made current, in order
    pinned: int = 0
    rng_states: dict = field(default_factory=dict)  # each device's generator state, as set

    def index(self, where, optional: bool) -> int:
        """``where`` read as torch reads a device argument (None and ``cuda``: the current device where
        ``optional``, else torch's ValueError), and checked against the devices this machine has."""
        index = _get_device_index(where, optional=optional)
        if not 0 <= index < self.count:
            raise RuntimeError(f"CUDA error: invalid device ordinal {index} (this machine has {self.count})")
        return index

    def install(self, monkeypatch) -> FakeCuda:
        cuda = torch.cuda
        fake = self

        class Event:
            def __init__(self, *args, **kwargs):
                pass

            def record(self, stream=None):
                self.stream = stream if stream is not None else FakeStream(fake.current)
                fake.events.append(self.stream)

            def synchronize(self):
                pass

        class device:  # a class, as torch's is (torch's own device parsing asks isinstance of it)
            def __init__(self, where):
                self.idx = fake.index(where, optional=True)

            def __enter__(self):
                self.previous, fake.current = fake.current, self.idx
                fake.entered.append(self.idx)

            def __exit__(self, *exc):
                fake.current = self.previous
                return False

        @contextlib.contextmanager
        def stream(s):
            with device(s.device):
                yield

        def current_stream(where=None):
            return FakeStream(fake.index(where, optional=True))

        def set_device(where):
            fake.current = fake.index(where, optional=False)
            fake.entered.append(fake.current)

        def rng_device(where) -> int:  # get/set_rng_state take "cuda" (the current device), as torch does
            where = torch.device("cuda", where) if isinstance(where, int) else torch.device(where)
            if where.type != "cuda":
                raise RuntimeError(f"Expected a cuda device, but got: {where}")
            return fake.index(where, optional=True)

        def get_rng_state(where="cuda"):
            return fake.rng_states.get(rng_device(where), torch.get_rng_state()).clone()

        def set_rng_state(state, where="cuda"):
            fake.rng_states[rng_device(where)] = state.clone()

        def properties(where=None):
            index = fake.index(where, optional=True)
            return SimpleNamespace(major=fake.major, minor=0, name=f"Fake GPU {index}", total_memory=80 * 2**30)

        real_empty = torch.empty

        def empty(*shape, pin_memory=False, **kwargs):
            fake.pinned += bool(pin_memory)
            return real_empty(*shape, **kwargs)

        replacements = {
            "is_available": lambda: True,
            "device_count": lambda: fake.count,
            "current_device": lambda: fake.current,
            "get_device_properties": properties,
            "get_device_name": lambda where=None: properties(where).name,
            "Event": Event,
            "device": device,
            "stream": stream,
            "current_stream": current_stream,
            "set_device": set_device,
            "empty_cache": lambda: None,
            "get_rng_state": get_rng_state,
            "set_rng_state": set_rng_state,
            "synchronize": lambda where=None: fake.index(where, optional=True) and None,
        }
        assert set(replacements) == COVERED
        for name, replacement in replacements.items():
            monkeypatch.setattr(cuda, name, replacement)
        monkeypatch.setattr(torch, "empty", empty)
        return self


def on_gpu(tensor: torch.Tensor, index: int) -> torch.Tensor:
    """``tensor`` (on the CPU) reporting ``cuda:index`` as its device, as do tensors made from it (one
    class per GPU, so that tensors on the same one can be joined: ``torch.cat``)."""
    return tensor.as_subclass(_on_gpu_class(index))


@functools.cache
def _on_gpu_class(index: int) -> type:
    class OnGpu(torch.Tensor):
        @property
        def device(self):
            return torch.device("cuda", index)

    return OnGpu
