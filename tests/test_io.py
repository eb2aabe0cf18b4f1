import os
import stat

import pytest

from ifqa.io import atomic_write


def test_atomic_write_leaves_nothing_on_failure_and_normal_permissions(tmp_path):
    target = tmp_path / "out.txt"
    with pytest.raises(RuntimeError):
        with atomic_write(target) as handle:
            handle.write("partial")
            raise RuntimeError("boom")
    assert list(tmp_path.iterdir()) == []
    with atomic_write(target) as handle:
        handle.write("whole")
    assert target.read_text() == "whole"
    mask = os.umask(0)
    os.umask(mask)
    assert stat.S_IMODE(target.stat().st_mode) == 0o666 & ~mask
