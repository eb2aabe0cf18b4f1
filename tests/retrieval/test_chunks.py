"""The chunk encoder's writer: a full disk is one line."""

import numpy as np
import pytest
import torch

from ifqa.errors import IfqaError
from ifqa.retrieval import chunks


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
