"""WIQA: the release read from a local HTTP server, the demo files, and one-line errors for bad lines."""

import json
import zipfile
from importlib import resources

import pytest

from ifqa.datasets import QuestionSource
from ifqa.datasets.wiqa import download, load_file
from ifqa.errors import IfqaError

DEMO = resources.files("ifqa.demo") / "wiqa"


def _line(stem="suppose it rains more happens, how will it affect MORE puddles?", label="more", **metadata):
    question = {"stem": stem, "para_steps": ["Rain falls.", "Water collects in low ground.", ""], "choices": []}
    if label is not None:
        question["answer_label"] = label
    return json.dumps(
        {
            "question": question,
            "metadata": {"ques_id": "q1", "question_type": "INPARA_EFFECT", "path_len": 1, **metadata},
        }
    )


def test_demo_splits_load_with_steps_type_and_path_length():
    dev = QuestionSource("wiqa-demo", "dev").load()
    assert dev.task == "wiqa" and len(dev) == 9
    example = dev.examples[0]
    assert example.answers[0] in ("more", "less", "no_effect")
    assert example.context and all(example.context)  # steps, the trailing empty one dropped
    assert set(example.meta) == {"question_type", "path_length", "paragraph"}


def test_download_from_a_local_server_caches_and_validates(http_server, tmp_path):
    root, url = http_server
    with zipfile.ZipFile(root / "wiqa.zip", "w") as archive:
        for split in ("train", "dev", "test"):
            source = "dev" if split == "test" else split
            archive.writestr(f"{split}.jsonl", (DEMO / f"{source}.jsonl").read_text())
    paths = download(tmp_path / "data", f"{url}/wiqa.zip", progress=False)
    assert [p.name for p in paths] == ["train.jsonl", "dev.jsonl", "test.jsonl"]
    assert len(QuestionSource("wiqa", "test", None, str(tmp_path / "data")).load()) == 9
    assert not list((tmp_path / "data" / "wiqa").glob(".*"))  # no temporary files left


def test_a_broken_release_never_reaches_the_cache(http_server, tmp_path):
    root, url = http_server
    with zipfile.ZipFile(root / "bad.zip", "w") as archive:
        archive.writestr("train.jsonl", _line(label="maybe") + "\n")
    with pytest.raises(IfqaError, match="train.jsonl:1: unknown answer_label 'maybe'"):
        download(tmp_path / "data", f"{url}/bad.zip", progress=False)
    (root / "notzip.zip").write_text("hello")
    with pytest.raises(IfqaError, match="not a zip archive"):
        download(tmp_path / "data", f"{url}/notzip.zip", progress=False)
    with pytest.raises(IfqaError, match="download failed"):
        download(tmp_path / "data", f"{url}/missing.zip", progress=False)
    assert not list((tmp_path / "data" / "wiqa").rglob("*.jsonl"))


@pytest.mark.parametrize(
    "line, message",
    [
        (_line(label=None), ":2: missing 'question.answer_label'"),
        (_line(label="more effect"), ":2: unknown answer_label 'more effect' (expected more, less, no_effect)"),
        (_line(stem=""), ":2: missing 'question.stem'"),
        (json.dumps({"question": {"stem": "x", "answer_label": "less"}}), ":2: missing 'metadata.ques_id'"),
        ("[1, 2]", ":2: expected an object with a 'question' object"),
        ("{not json", ":2: invalid JSON"),
    ],
)
def test_bad_lines_are_one_line_errors_naming_file_and_line(tmp_path, cli, line, message):
    path = tmp_path / "wiqa.jsonl"
    path.write_text(_line(ques_id="q0") + "\n" + line + "\n")
    with pytest.raises(IfqaError, match=message.replace("(", r"\(").replace(")", r"\)")):
        load_file(path)
    out = tmp_path / "pred.jsonl"
    result = cli("read", "majority", "--setting", "wiqa-demo", "--questions", path, "-o", out)
    assert result.returncode == 1 and result.stderr.strip().count("\n") == 0
    assert f"{path}:2:" in result.stderr and not out.exists()


def test_download_split_option_is_ifqas(cli, tmp_path):
    result = cli("data", "download", "--setting", "wiqa", "--split", "dev", "--data-dir", tmp_path)
    assert result.returncode == 1 and "--split picks IfQA splits" in result.stderr
