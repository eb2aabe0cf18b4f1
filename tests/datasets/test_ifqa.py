import json

import pytest

from ifqa.datasets import ifqa as data
from ifqa.datasets.demo import load_demo
from ifqa.errors import IfqaError
from tests.conftest import write_questions

GOOD = [
    {
        "idx": 0,
        "question": "If the sky were green, what colour would grass look against it?",
        "answers": ["green", "Green"],
        "context": ["The sky is blue."],
    },
    {"idx": 1, "question": "If Paris were in Spain, what would its currency be?", "answers": ["euro"], "context": []},
]


def test_loads_official_format_and_uses_str_idx_as_qid(tmp_path):
    examples = data.load_examples(write_questions(tmp_path / "q.json", GOOD))
    assert [e.qid for e in examples] == ["0", "1"]
    assert examples[0].answers == ["green", "Green"]
    assert examples[0].to_json() == GOOD[0]


def test_loads_jsonl_too(tmp_path):
    path = tmp_path / "q.jsonl"
    path.write_text("\n".join(json.dumps(e) for e in GOOD) + "\n")
    assert len(data.load_examples(path)) == 2


@pytest.mark.parametrize(
    "broken, message",
    [
        ({"question": "q?", "answers": ["a"]}, "example 1: missing field 'idx'"),
        ({"idx": 5, "question": "", "answers": ["a"]}, "example 1: 'question' must be a non-empty string"),
        ({"idx": 5, "question": "q?", "answers": []}, "example 1: 'answers' must be a non-empty list"),
        ({"idx": 5, "question": "q?", "answers": "a"}, "example 1: 'answers' must be a non-empty list"),
        ({"idx": 5, "question": "q?", "answers": ["a", 3]}, "example 1: 'answers' must hold non-empty strings"),
        (
            {"idx": 5, "question": "q?", "answers": ["a"], "context": [1]},
            "example 1: 'context' must be a list of strings",
        ),
        ({"idx": 0, "question": "q?", "answers": ["a"]}, "example 1: duplicate idx '0'"),
        ("just a string", "example 1: expected an object"),
    ],
)
def test_malformed_examples_name_file_example_and_problem(tmp_path, broken, message):
    path = write_questions(tmp_path / "q.json", [GOOD[0], broken])
    with pytest.raises(IfqaError) as error:
        data.load_examples(path)
    assert str(error.value) == f"{path}: {message}" or str(error.value).startswith(f"{path}: {message}")


def test_bad_json_names_the_line(tmp_path):
    path = tmp_path / "q.json"
    path.write_text('[\n{"idx": 0,\n "question": }\n]')
    with pytest.raises(IfqaError, match=r"q\.json:3: invalid JSON"):
        data.load_examples(path)


def test_not_a_list(tmp_path):
    path = tmp_path / "q.json"
    path.write_text('{"idx": 0}')
    with pytest.raises(IfqaError, match="expected a JSON list"):
        data.load_examples(path)


def test_demo_set_ships_with_the_package():
    dev, train = load_demo("dev"), load_demo("train")
    assert len(dev) == 24 and len(train) == 12
    assert not {e.question for e in dev} & {e.question for e in train}
    assert all(e.question.startswith("If ") and e.context for e in dev + train)


def test_cache_dir_follows_env(monkeypatch, tmp_path):
    monkeypatch.setenv("IFQA_DATA_DIR", str(tmp_path))
    assert data.split_path("supervised", "dev") == tmp_path / "full_split" / "dev.json"
    assert data.split_path("few-shot", "train", tmp_path / "x") == tmp_path / "x" / "few_split" / "train.json"


def test_download_from_a_local_server_then_load_from_cache(http_server, tmp_path):
    root, url = http_server
    (root / "full_split").mkdir()
    (root / "full_split" / "dev.json").write_text(json.dumps(GOOD))
    cache = tmp_path / "cache"
    paths = data.download(["supervised"], ["dev"], cache, base_url=url)
    assert paths == [cache / "full_split" / "dev.json"]
    (root / "full_split" / "dev.json").unlink()  # a second load must not need the server
    assert [e.qid for e in data.load_split("supervised", "dev", cache)] == ["0", "1"]


def test_download_rejects_a_malformed_file_and_caches_nothing(http_server, tmp_path):
    root, url = http_server
    (root / "few_split").mkdir()
    (root / "few_split" / "test.json").write_text(json.dumps([{"idx": 1, "question": "q?"}]))
    with pytest.raises(IfqaError, match="missing field 'answers'"):
        data.download(["few-shot"], ["test"], tmp_path / "cache", base_url=url)
    assert not (tmp_path / "cache" / "few_split" / "test.json").exists()


@pytest.mark.parametrize("credentials", ["query", "user"])
def test_a_base_url_with_credentials_downloads_the_same_files(http_server, tmp_path, credentials):
    """A token in the query stays after the file's path (not glued into it); a user part, which urllib
    cannot send itself, goes as HTTP Basic authentication."""
    root, url = http_server
    (root / "full_split").mkdir()
    (root / "full_split" / "dev.json").write_text(json.dumps(GOOD))
    base = f"{url}?token=abc123def" if credentials == "query" else url.replace("http://", "http://user:pw123456@")
    paths = data.download(["supervised"], ["dev"], tmp_path / "cache", base_url=base)
    assert [e.qid for e in data.load_examples(paths[0])] == ["0", "1"]


def test_download_error_is_one_line(http_server, tmp_path):
    _, url = http_server
    with pytest.raises(IfqaError, match="download failed"):
        data.download(["few-shot"], ["dev"], tmp_path / "cache", base_url=url)


def test_default_url_is_the_official_release():
    assert data.DEFAULT_BASE_URL == "https://raw.githubusercontent.com/wyu97/IfQA/main/dataset"


@pytest.mark.shared_data
def test_real_release_files_load(shared):
    assert len(data.load_examples(shared / "ifqa/full_split/train.json")) == 2400
    assert len(data.load_examples(shared / "ifqa/full_split/dev.json")) == 700
    assert len(data.load_examples(shared / "ifqa/few_split/train.json")) == 599
