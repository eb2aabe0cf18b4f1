"""What the machine refuses (trust round 6): a full disk, too few file handles, too little memory, each
one line saying what it is and what to do, from one place (errors.system_error_line, used by the
command line's error handler for every command)."""

import errno

import pytest

CASES = [
    (OSError(errno.ENOSPC, "No space left on device"), "is full"),
    (OSError("1227079 requested and 499680 written"), "is full"),  # numpy's short write
    (OSError(errno.EMFILE, "Too many open files"), "ulimit -n"),
    (MemoryError(), "out of memory"),
    (
        RuntimeError("[enforce fail at alloc_cpu.cpp:117] data. DefaultCPUAllocator: can't allocate memory"),
        "--batch-size",
    ),
]


@pytest.mark.parametrize("error, expected", CASES, ids=[c[1] + " " + type(c[0]).__name__ for c in CASES])
def test_a_system_refusal_is_one_line_saying_what_to_do(cli, monkeypatch, tmp_path, error, expected):
    from ifqa.retrieval import bm25

    def refuse(*args, **kwargs):
        raise error

    monkeypatch.setattr(bm25, "build", refuse)
    corpus = tmp_path / "passages.jsonl"
    corpus.write_text('{"id": "p1", "title": "T", "text": "a river"}\n')
    result = cli("index", "bm25", "--corpus", corpus, "-o", tmp_path / "idx", "--engine", "bm25s", "--no-progress")
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 1 and len(lines) == 1 and "Traceback" not in result.stderr, result.stderr
    assert expected in lines[0]
    if expected == "is full":
        assert str(tmp_path / "idx") in lines[0]  # where, when the error names no file


def test_a_runtime_error_the_machine_did_not_cause_is_not_hidden(cli, monkeypatch, tmp_path):
    from ifqa.retrieval import bm25

    monkeypatch.setattr(bm25, "build", lambda *a, **k: (_ for _ in ()).throw(RuntimeError("a bug")))
    corpus = tmp_path / "passages.jsonl"
    corpus.write_text('{"id": "p1", "title": "T", "text": "a river"}\n')
    result = cli("index", "bm25", "--corpus", corpus, "-o", tmp_path / "idx", "--engine", "bm25s", "--no-progress")
    assert result.returncode == 1 and "Traceback" in result.stderr and "RuntimeError: a bug" in result.stderr
