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


def test_staging_left_by_a_killed_run_is_removed_by_the_next(tmp_path):
    """A SIGKILLed writer leaves its staging file or folder; the next write of the same output removes
    it (its process is gone), while a live process's staging is left alone."""
    import os

    from ifqa.io import atomic_dir, atomic_write

    dead = 2**22 + 12345  # above Linux's default pid_max: no such process
    stale_file = tmp_path / f".run.jsonl.{dead}.abc123.tmp"
    stale_file.write_text("half a run")
    stale_dir = tmp_path / f".model.{dead}.xyz.tmp"
    stale_dir.mkdir()
    alive = tmp_path / f".run.jsonl.{os.getpid()}.keep.tmp"
    alive.write_text("someone is writing this")
    with atomic_write(tmp_path / "run.jsonl") as handle:
        handle.write("done\n")
    with atomic_dir(tmp_path / "model") as folder:
        (folder / "weights").write_text("w")
    assert not stale_file.exists() and not stale_dir.exists() and alive.exists()
    assert (tmp_path / "run.jsonl").read_text() == "done\n" and (tmp_path / "model" / "weights").exists()


def test_a_bom_at_the_start_of_a_wikiextractor_file_keeps_the_first_article(tmp_path, cli):
    import json

    source = tmp_path / "wiki.jsonl"
    articles = [
        {"id": str(i), "title": f"Article {i}", "text": f"Article {i} is about rivers and towns. " * 5}
        for i in range(3)
    ]
    source.write_bytes(b"\xef\xbb\xbf" + "".join(json.dumps(a) + "\n" for a in articles).encode())
    result = cli("corpus", "build", source, "-o", tmp_path / "passages.jsonl", "--no-progress")
    assert result.returncode == 0, result.stderr
    titles = {json.loads(line)["title"] for line in (tmp_path / "passages.jsonl").read_text().splitlines()}
    assert titles == {"Article 0", "Article 1", "Article 2"}


def test_a_byte_order_mark_is_not_part_of_the_first_record(cli, tmp_path):
    """Editors on some systems put a UTF-8 BOM first: questions, predictions and runs read the same."""
    import json

    from ifqa.datasets.demo import load_demo

    dev = load_demo("dev")
    questions = tmp_path / "q.json"
    questions.write_text(
        "\ufeff" + json.dumps([{"idx": e.qid, "question": e.question, "answers": e.answers} for e in dev]),
        encoding="utf-8",
    )
    predictions = tmp_path / "p.jsonl"
    predictions.write_text(
        "\ufeff" + "".join(json.dumps({"qid": e.qid, "prediction": e.answers[0]}) + "\n" for e in dev), encoding="utf-8"
    )
    result = cli("evaluate", "--predictions", predictions, "--questions", questions, "--json")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["em"] == 100.0
    run = tmp_path / "run.jsonl"
    assert cli("retrieve", "--k", "3", "--questions", questions, "-o", run, "--no-progress").returncode == 0
    run.write_text("\ufeff" + run.read_text(encoding="utf-8"), encoding="utf-8")
    result = cli("evaluate", "--run", run, "--json")
    assert result.returncode == 0 and json.loads(result.stdout)["n"] == len(dev), result.stderr


def test_a_lock_that_cannot_be_written_leaves_no_lock_file(tmp_path, monkeypatch):
    """A full disk when the lock's holder is written (an index rebuilt with --force): the error goes up
    and no ``.NAME.lock`` stays beside the output."""
    import builtins
    import errno

    import pytest

    from ifqa.io import exclusive

    real_open = builtins.open

    class Full:
        def __init__(self, handle):
            self.handle = handle

        def __getattr__(self, name):
            return getattr(self.handle, name)

        def flush(self):
            raise OSError(errno.ENOSPC, "No space left on device")

    def opening(path, *args, **kwargs):
        handle = real_open(path, *args, **kwargs)
        return Full(handle) if str(path).endswith(".lock") else handle

    monkeypatch.setattr(builtins, "open", opening)
    with pytest.raises(OSError, match="No space left"), exclusive(tmp_path / "ix", "busy"):
        pass
    assert list(tmp_path.iterdir()) == []
