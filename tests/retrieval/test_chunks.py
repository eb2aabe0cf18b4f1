"""The chunk encoder's GPU copy-back and its writer, on a fake CUDA (tests/fake_cuda.py): a chunk
encoded on any GPU is waited for on that GPU's stream, and a full disk is one line."""

import numpy as np
import pytest
import torch

from ifqa.errors import IfqaError
from ifqa.retrieval import chunks
from tests.fake_cuda import FakeCuda, on_gpu


@pytest.mark.parametrize("gpu", [0, 1, 3])
def test_a_chunk_from_any_gpu_is_waited_for_on_that_gpus_stream(monkeypatch, gpu):
    """An event recorded without a stream lands on the current device's (GPU 0's, when nothing set
    it): on any other GPU it completes at once and the writer would read the buffer early."""
    cuda = FakeCuda(count=4).install(monkeypatch)
    vectors = torch.arange(12, dtype=torch.float32).reshape(3, 4)
    host, done = chunks._copy_back(on_gpu(vectors, gpu))
    assert cuda.events == [done.stream] and done.stream.device == gpu
    assert cuda.pinned == 1 and cuda.current == 0  # the copy's device was entered, then left
    assert torch.equal(host.as_subclass(torch.Tensor), vectors)


def test_a_chunk_the_disk_cannot_hold_is_one_line_and_finished_chunks_stay(tmp_path, monkeypatch):
    """The writer thread's OSError (a full disk) reaches the user as the main thread's would: one line."""
    encoder = chunks.ChunkEncoder.__new__(chunks.ChunkEncoder)
    encoder.folder, encoder.chunk = tmp_path, 2
    encoder.encoder = type("Encoder", (), {"dim": 3, "precision": "fp32"})()
    (tmp_path / "embeddings").mkdir()
    assert encoder._write(0, np.arange(2), torch.ones(2, 3), None) == 2

    def full(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(np, "save", full)
    with pytest.raises(IfqaError, match="cannot write chunk 1 \\(No space left on device\\); finished chunks are kept"):
        encoder._write(1, np.arange(2, 4), torch.ones(2, 3), None)
    assert chunks.chunk_problem(chunks.chunk_path(tmp_path, 0), 2) is None
    assert sorted(p.name for p in (tmp_path / "embeddings").iterdir()) == ["chunk-0000000.npy"]
