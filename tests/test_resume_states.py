"""A hand-crafted resume state (issue #47, family 9): every command that resumes (found by walking
the command tree for the ones whose help promises it) meets a state edited by hand, cut short
outside ifqa's atomic writes or taken from another run, and says so in one line naming the file,
with exit 1, leaving the state as it was (nothing of the user's is changed or lost)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from ifqa.cli import cli as ifqa_cli
from tests.test_outputs import _commands

PROBLEM = "not a resume state this run can continue from"
# commands that promise resuming but keep no state of their own to hand-edit
NO_STATE = {("train", "control"): "a logistic regression fitted in one go: --stop-after has nothing to stop"}
SAME_LOOP = {  # ifqa/training/loop.py keeps every state (the LLM reader its best EM beside it, as FiD)
    ("train", "retriever"): ("train", "reranker"),
    ("train", "llm"): ("train", "fid"),
}


def _resumable() -> set[tuple[str, ...]]:
    found = set()
    for path, command in _commands(ifqa_cli):
        text = " ".join([command.help or "", *(getattr(p, "help", None) or "" for p in command.params)])
        if "resum" in text.lower():
            found.add(path)
    return found


def _torch_edit(path: Path, edit) -> None:
    import torch

    saved = torch.load(path, map_location="cpu", weights_only=True)
    torch.save(edit(saved), path)


def _snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def _refused_and_kept(cli, args, folder: Path, where: str) -> None:
    before = _snapshot(folder)
    result = cli(*args)
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 1 and len(lines) == 1 and "Traceback" not in result.stderr, result.stderr
    assert where in lines[0] and (PROBLEM in lines[0] or "can load safely" in lines[0]), lines[0]
    assert _snapshot(folder) == before


def test_every_command_that_resumes_is_covered():
    covered = {case[0] for case in CASES} | set(NO_STATE) | set(SAME_LOOP)
    assert _resumable() <= covered, _resumable() - covered


@pytest.fixture(scope="module")
def reranker_state(tmp_path_factory, tiny_model):
    from tests.conftest import run_cli
    from tests.training.test_reranker import TRAIN

    out = tmp_path_factory.mktemp("state") / "rr"
    args = ["train", "reranker", *TRAIN, "--model", str(tiny_model), "-o", str(out)]
    assert run_cli(*args, "--stop-after", "2").returncode == 0
    return out, args


TRAINING_EDITS = {
    "garbage": lambda state: (state / "trainer.pt").write_bytes(b"not a torch file"),
    "missing keys": lambda state: _torch_edit(state / "trainer.pt", lambda saved: {"step": saved["step"]}),
    "step past the end": lambda state: _torch_edit(state / "trainer.pt", lambda saved: {**saved, "step": 99}),
    "negative step": lambda state: _torch_edit(state / "trainer.pt", lambda saved: {**saved, "step": -1}),
    "another model's weights": lambda state: _torch_edit(
        state / "model.pt", lambda saved: {"w": saved[next(iter(saved))][:1]}
    ),
    "a file deleted": lambda state: (state / "model.pt").unlink(),
}


def _rerun_on_an_edited_copy(cli, trained, tmp_path, edit, state: str, named: str) -> None:
    """``edit`` a copy of a stopped training folder's ``state``, then rerun its command on the copy."""
    out, args = trained
    copy = tmp_path / out.name
    shutil.copytree(out, copy)
    edit(copy / state)
    _refused_and_kept(cli, [*args[:-1], str(copy)], copy, str(copy / named))


@pytest.mark.parametrize("edit", TRAINING_EDITS)
def test_train_reranker_refuses_a_hand_edited_state(cli, reranker_state, tmp_path, edit):
    _rerun_on_an_edited_copy(cli, reranker_state, tmp_path, TRAINING_EDITS[edit], "state", "state")


@pytest.fixture(scope="module")
def fid_state(tmp_path_factory):
    from tests.conftest import run_cli
    from tests.readers.test_fid import TOY
    from tests.readers.tiny_models import tiny_t5

    base = tmp_path_factory.mktemp("fid")
    run = base / "run.jsonl"
    run.write_text(
        "".join(
            json.dumps(
                {"qid": str(i), "question": q, "answers": [a], "ctxs": [{"id": str(i), "title": "T", "text": a}]}
            )
            + "\n"
            for i, (q, a) in enumerate(TOY)
        )
    )
    out = base / "fid"
    args = ["train", "fid", "--run", str(run), "--model", str(tiny_t5(base / "t5")), "--steps", "4"]
    args += ["--batch-size", "2", "--n-context", "1", "--text-maxlength", "24", "--no-progress", "-o", str(out)]
    assert run_cli(*args, "--stop-after", "1").returncode == 0
    assert (out / "state" / "trainer.pt").exists()
    return out, args


FID_EDITS = {  # FiD trains on the same loop: its state is the loop's, with FiD's best dev EM beside it
    "garbage": TRAINING_EDITS["garbage"],
    "missing keys": TRAINING_EDITS["missing keys"],
    "step past the end": TRAINING_EDITS["step past the end"],
    "a log that is no list": lambda state: _torch_edit(state / "trainer.pt", lambda saved: {**saved, "log": "3"}),
    "a best EM that is no number": lambda state: _torch_edit(
        state / "trainer.pt", lambda saved: {**saved, "extra": {"best_em": "high"}}
    ),
}


@pytest.mark.parametrize("edit", FID_EDITS)
def test_train_fid_refuses_a_hand_edited_state(cli, fid_state, tmp_path, edit):
    _rerun_on_an_edited_copy(cli, fid_state, tmp_path, FID_EDITS[edit], "state", "state")


@pytest.mark.parametrize("line", ['{"qid": "no-such-question", "ctxs": []}', "[1, 2]", '{"qid": "0"}'])
def test_rerank_refuses_a_hand_edited_partial_file(cli, tmp_path, tiny_model, line):
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    from ifqa.retrieval.rerank import load_reranker

    model = tmp_path / "reranker"
    AutoModelForSequenceClassification.from_pretrained(tiny_model, num_labels=1).save_pretrained(model)
    AutoTokenizer.from_pretrained(tiny_model).save_pretrained(model)
    run, out = tmp_path / "run.jsonl", tmp_path / "out" / "reranked.jsonl"
    assert cli("retrieve", "--k", "3", "-o", run, "--no-progress").returncode == 0
    header = {
        "partial_of": str(run),
        "run_bytes": run.stat().st_size,
        "reranker": load_reranker(str(model), 3).describe(),
    }
    out.parent.mkdir()
    Path(f"{out}.partial").write_text(json.dumps(header) + "\n" + line + "\n")
    args = ["rerank", "--run", run, "--model", model, "--depth", "3", "-o", out, "--no-progress"]
    _refused_and_kept(cli, args, out.parent, f"{out}.partial")


@pytest.mark.parametrize("settings", ["[1, 2]", '{"encoder": ', '"text"'])
def test_index_dense_refuses_hand_edited_settings(cli, tmp_path, tiny_model, settings):
    from ifqa.datasets.demo import corpus_path

    folder = tmp_path / "dx"
    (folder / "embeddings").mkdir(parents=True)
    (folder / "embeddings" / "settings.json").write_text(settings)
    args = ["index", "dense", "--corpus", corpus_path(), "--encoder", tiny_model, "-o", folder, "--no-progress"]
    _refused_and_kept(cli, args, folder, str(folder / "embeddings" / "settings.json"))


@pytest.mark.parametrize("damage", ["stats", "ids", "deleted"])
def test_corpus_build_refuses_hand_edited_parts(cli, tmp_path, monkeypatch, damage):
    from ifqa.corpus import build as build_module

    source = tmp_path / "articles.jsonl"
    source.write_text(
        "".join(json.dumps({"id": str(i), "title": f"A{i}", "text": "word " * 150}) + "\n" for i in range(40))
    )
    out = tmp_path / "out" / "p.jsonl"

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    args = ["corpus", "build", source, "-o", out, "--batch-size", "5", "--no-progress"]
    with monkeypatch.context() as patched:  # stopped after every part is written, before they are joined
        patched.setattr(build_module, "_join_parts", interrupted)
        assert cli(*args).returncode != 0
    parts = out.parent / ".p.jsonl.parts"
    first = sorted(parts.glob("*.part"))[0]
    if damage == "stats":
        first.with_suffix(".stats.json").write_text('{"records": 5}')
    elif damage == "ids":
        first.with_suffix(".ids").write_bytes(b"123")
    else:
        first.with_suffix(".stats.json").unlink()
    _refused_and_kept(cli, args, out.parent, str(first))


CASES = [
    (("train", "reranker"), test_train_reranker_refuses_a_hand_edited_state),
    (("train", "fid"), test_train_fid_refuses_a_hand_edited_state),
    (("rerank",), test_rerank_refuses_a_hand_edited_partial_file),
    (("index", "dense"), test_index_dense_refuses_hand_edited_settings),
    (("corpus", "build"), test_corpus_build_refuses_hand_edited_parts),
]


@pytest.mark.parametrize("edit", ["garbage", "missing keys", "negative step", "a file deleted"])
def test_a_damaged_state_is_refused_before_mining_writes_anything(cli, reranker_state, tmp_path, edit):
    """Trust round 6: the state was checked only once mining had written groups.json; what can be checked
    without the model is checked first, so a refused run leaves the folder as it was."""
    out, args = reranker_state
    copy = tmp_path / out.name
    shutil.copytree(out, copy)
    for mined in ("groups.jsonl", "groups.json"):
        (copy / mined).unlink()
    TRAINING_EDITS[edit](copy / "state")
    _refused_and_kept(cli, [*args[:-1], str(copy)], copy, str(copy / "state"))
    assert not (copy / "groups.json").exists()
