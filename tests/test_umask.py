"""Outputs get the modes the user's umask gives (trust round 6): a folder staged by ``mkdtemp`` (0700)
or a file a library staged itself (transformers' ``model.safetensors``, 0600) is given them once, in
``io.umask_modes``, just before it is renamed into place. Every place that publishes staged output calls
it (the walk below finds them), and the commands that publish folders are run under umask 022."""

from __future__ import annotations

import ast
import os
import stat
from pathlib import Path

import pytest

from ifqa.io import atomic_dir, atomic_write

PACKAGE = Path(__file__).resolve().parents[1] / "ifqa"


@pytest.fixture
def umask():
    def set_mask(mask: int) -> None:
        os.umask(mask)

    saved = os.umask(0o022)
    yield set_mask
    os.umask(saved)


def _modes(root: Path) -> dict[str, int]:
    found = {str(root): stat.S_IMODE(root.stat().st_mode)} if root.is_dir() else {}
    for path in [root] if root.is_file() else root.rglob("*"):
        found[str(path)] = stat.S_IMODE(path.stat().st_mode)
    return found


def _readable_by_others(root: Path) -> None:
    for path, mode in _modes(root).items():
        wanted = 0o755 if Path(path).is_dir() else 0o644
        assert mode & wanted == wanted and not mode & 0o022, (path, oct(mode))


@pytest.mark.parametrize("mask", [0o022, 0o077])
def test_the_helpers_give_the_umask_modes(tmp_path, umask, mask):
    umask(mask)
    with atomic_write(tmp_path / "f.txt") as handle:
        handle.write("x")
    with atomic_dir(tmp_path / "d") as staged:
        (staged / "weights").write_bytes(b"w")
        os.chmod(staged / "weights", 0o600)  # as a library stages its own file
    for path, mode in _modes(tmp_path / "d").items() | _modes(tmp_path / "f.txt").items():
        full = 0o777 if Path(path).is_dir() else 0o666
        assert mode == full & ~mask, (path, oct(mode))


def test_every_place_that_publishes_staged_output_gives_the_umask_modes():
    """A function that renames a staged file or folder into place (os.replace, Path.rename) calls
    umask_modes first, or publishes through atomic_write / atomic_dir, which do."""
    missing = []
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.FunctionDef):
                continue
            names = {n.attr if isinstance(n, ast.Attribute) else getattr(n, "id", "") for n in ast.walk(node)}
            calls = {
                (c.func.attr if isinstance(c.func, ast.Attribute) else getattr(c.func, "id", ""))
                for c in ast.walk(node)
                if isinstance(c, ast.Call)
            }
            publishes = "replace" in calls and "os" in names or "rename" in calls
            staged = {"mkdtemp", "mkstemp", "mkdir", "save_pretrained", "save"} & calls or "tmp" in str(ast.dump(node))
            if publishes and staged and "umask_modes" not in names and node.name not in ALLOWED:
                missing.append(f"{path.relative_to(PACKAGE)}:{node.lineno} {node.name}")
    assert not missing, missing


#: Renames of what is already published (its modes the user's): none now (io.publish_dir swaps every
#: folder in, modes given, and io.settled moves back what it had moved aside).
ALLOWED: set[str] = set()


def test_index_and_training_outputs_are_readable_by_others(cli, umask, tmp_path, tiny_model):
    from tests.training.test_reranker import TRAIN

    corpus = tmp_path / "passages.jsonl"
    corpus.write_text('{"id": "p1", "title": "T", "text": "a river"}\n{"id": "p2", "title": "T", "text": "a bridge"}\n')
    assert cli("index", "bm25", "--corpus", corpus, "-o", tmp_path / "bm25", "--no-progress").returncode == 0
    _readable_by_others(tmp_path / "bm25")
    result = cli("train", "reranker", *TRAIN, "--model", tiny_model, "-o", tmp_path / "rr", "--no-progress")
    assert result.returncode == 0, result.stderr
    _readable_by_others(tmp_path / "rr")
