"""A machine with GPUs, as torch.cuda answers for it, for testing the GPU paths on a CPU: it records
which device is current, which stream each event is recorded on and what is pinned, and keeps the
CUDA rule that matters here: an event recorded without a stream lands on the *current* device's
stream. Tensors stay on the CPU; ``on_gpu`` makes one report a GPU as its device."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from types import SimpleNamespace

import torch


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

    def install(self, monkeypatch) -> FakeCuda:
        cuda = torch.cuda
        fake = self

        class Event:
            def record(self, stream=None):
                self.stream = stream if stream is not None else FakeStream(fake.current)
                fake.events.append(self.stream)

            def synchronize(self):
                pass

        @contextlib.contextmanager
        def device(index):
            index = index.index if isinstance(index, torch.device) else int(index)
            previous, fake.current = fake.current, index
            fake.entered.append(index)
            try:
                yield
            finally:
                fake.current = previous

        @contextlib.contextmanager
        def stream(s):
            with device(s.device):
                yield

        def current_stream(where=None):
            index = torch.device(where).index if where is not None else None
            return FakeStream(fake.current if index is None else index)

        def set_device(where):
            fake.current = torch.device(where).index if not isinstance(where, int) else where
            fake.entered.append(fake.current)

        real_empty = torch.empty

        def empty(*shape, pin_memory=False, **kwargs):
            fake.pinned += bool(pin_memory)
            return real_empty(*shape, **kwargs)

        monkeypatch.setattr(cuda, "is_available", lambda: True)
        monkeypatch.setattr(cuda, "device_count", lambda: fake.count)
        monkeypatch.setattr(cuda, "current_device", lambda: fake.current)
        monkeypatch.setattr(
            cuda,
            "get_device_properties",
            lambda index=None: SimpleNamespace(major=fake.major, minor=0, name=f"Fake GPU {index}"),
        )
        monkeypatch.setattr(cuda, "Event", Event)
        monkeypatch.setattr(cuda, "device", device)
        monkeypatch.setattr(cuda, "stream", stream)
        monkeypatch.setattr(cuda, "current_stream", current_stream)
        monkeypatch.setattr(cuda, "set_device", set_device)
        monkeypatch.setattr(torch, "empty", empty)
        return self


def on_gpu(tensor: torch.Tensor, index: int) -> torch.Tensor:
    """``tensor`` (on the CPU) reporting ``cuda:index`` as its device, as do tensors made from it."""

    class OnGpu(torch.Tensor):
        @property
        def device(self):
            return torch.device("cuda", index)

    return tensor.as_subclass(OnGpu)
