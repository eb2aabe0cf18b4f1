"""Question sets from the Hugging Face Hub layout, read with `datasets`, offline: a local folder of
Parquet or JSONL files with a dataset card, as the Hub serves them (the real Hub ids stay the defaults)."""

import json
import os

import pytest

from ifqa.datasets import QuestionSource
from ifqa.datasets.demo import load_demo
from ifqa.errors import IfqaError

DEV = load_demo("dev")


def hub_folder(folder, splits: dict, fmt: str = "parquet"):
    """Rows per split (a list of dicts, or a ``datasets.Dataset``) as a dataset folder in Hub layout:
    Parquet or JSONL files and a card naming them, as the Hub serves a dataset. The one writer of such
    folders for the tests (the same splits give the same card)."""
    from datasets import Dataset

    (folder / "data").mkdir(parents=True)
    card = ["---", "configs:", "- config_name: default", "  data_files:"]
    for split, rows in splits.items():
        data = rows if isinstance(rows, Dataset) else Dataset.from_list(rows)
        path = str(folder / "data" / f"{split}-00000-of-00001.{fmt}")
        data.to_parquet(path) if fmt == "parquet" else data.to_json(path)
        card += [f"  - split: {split}", f"    path: data/{split}-*"]
    (folder / "README.md").write_text("\n".join([*card, "---", "# written by the tests", ""]))
    return folder


def cached_hub_dataset(cache, repo_id: str, folder) -> None:
    """``folder`` placed in the ``datasets`` cache ``cache`` (``HF_DATASETS_CACHE``) as a download of
    ``repo_id`` leaves it, so that ``HF_HUB_OFFLINE=1`` reads the Hub id from the cache, as on a
    machine that downloaded it once. (The layout is ``datasets``': NAMESPACE___NAME/CONFIG/VERSION/HASH.)"""
    import shutil

    from datasets import load_dataset

    work = cache.parent / f"{cache.name}-preparing"
    load_dataset(str(folder), cache_dir=str(work))
    prepared = next(work.rglob("dataset_info.json")).parent
    owner, name = repo_id.split("/")
    target = cache / f"{owner}___{name}" / "default" / "0.0.0" / prepared.name
    target.mkdir(parents=True)
    for path in prepared.iterdir():  # the tables are named after the builder: NAME-SPLIT.arrow
        split = path.stem.rsplit("-", 1)[-1]
        shutil.copy(path, target / (f"{name}-{split}.arrow" if path.suffix == ".arrow" else path.name))
    shutil.rmtree(work)


def _hub_folder(folder, fmt="parquet", names=("idx", "question", "answers")):
    """The demo questions as a dataset folder in Hub layout (FlashRAG-like columns when asked)."""
    rows = [{names[0]: e.qid, names[1]: e.question, names[2]: e.answers, "context": e.context} for e in DEV]
    return hub_folder(folder, {"dev": rows, "train": rows[:4]}, fmt)


@pytest.mark.parametrize("fmt", ["parquet", "jsonl"])
def test_a_local_hub_folder_is_a_question_set_scored_like_any(cli, tmp_path, fmt):
    folder = _hub_folder(tmp_path / "ds", fmt)
    spec = f"hf:{folder}"
    questions = QuestionSource(file=spec).load()
    assert [e.qid for e in questions] == [e.qid for e in DEV] and questions[0].context == DEV[0].context
    assert questions.describe()["hub"]["split"] == "dev" and questions.describe()["hub"]["fingerprint"]
    preds = tmp_path / "preds.jsonl"
    preds.write_text("".join(json.dumps({"qid": e.qid, "prediction": e.answers[0]}) + "\n" for e in DEV))
    result = cli("evaluate", "--predictions", preds, "--questions", spec, "--json")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["em"] == 100.0
    run = tmp_path / "run.jsonl"
    assert cli("retrieve", "--questions", f"{spec}?split=train", "--k", "3", "-o", run, "--no-progress").returncode == 0
    manifest = json.loads((tmp_path / "run.jsonl.manifest.json").read_text())
    assert manifest["questions"]["name"] == f"{spec}?split=train" and manifest["questions"]["n"] == 4
    assert cli("evaluate", "--run", run, "--json").returncode == 0  # the recorded spec reopens the same questions


def test_fields_map_other_columns(tmp_path):
    folder = _hub_folder(tmp_path / "flash", names=("id", "query", "golden_answers"))
    questions = QuestionSource(file=f"hf:{folder}").load()  # FlashRAG's names are found by default
    assert questions[0].question == DEV[0].question and questions[0].answers == DEV[0].answers
    mapped = QuestionSource(file=f"hf:{folder}?fields=question:query,answers:golden_answers,qid:id").load()
    assert mapped.describe()["hub"]["fields"]["question"] == "query"


@pytest.mark.parametrize(
    "suffix, expected",
    [
        (
            "?fields=question:nope",
            "fields maps question to 'nope', which the dataset lacks; its columns: idx, question",
        ),
        ("?split=test", "no split 'test'; its splits: "),
        ("?colour=red", "unknown option 'colour'"),
    ],
)
def test_what_the_dataset_lacks_is_one_line(cli, tmp_path, suffix, expected):
    folder = _hub_folder(tmp_path / "ds")
    result = cli("evaluate", "--run", tmp_path / "none.jsonl", "--questions", f"hf:{folder}{suffix}")
    assert result.returncode == 1 and expected in result.stderr and "Traceback" not in result.stderr


def test_a_hub_id_that_cannot_be_reached_offline_says_how_to_point_at_a_copy(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    with pytest.raises(IfqaError, match=r"not in the Hugging Face cache while offline.*hf:/path/to/folder"):
        QuestionSource(file="hf:someone/counterfactual-set").load()
    assert os.environ["HF_HUB_OFFLINE"] == "1"


def test_a_hub_id_is_read_offline_from_the_cache_a_download_left(cli, tmp_path):
    rows = [{"id": e.qid, "question": e.question, "answers": e.answers} for e in DEV]
    cache = tmp_path / "hf-datasets"
    cached_hub_dataset(cache, "someone/counterfactual-set", hub_folder(tmp_path / "ds", {"test": rows}))
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_CACHE": str(cache), "IFQA_CACHE_DIR": str(tmp_path / "c")}
    preds = tmp_path / "preds.jsonl"
    preds.write_text("".join(json.dumps({"qid": e.qid, "prediction": e.answers[0]}) + "\n" for e in DEV))
    spec = "hf:someone/counterfactual-set?split=test"
    result = cli("evaluate", "--predictions", preds, "--questions", spec, "--json", env=env)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["em"] == 100.0


def test_two_folders_named_alike_with_the_same_card_are_two_question_sets(tmp_path):
    """`datasets` keys its cache by a folder's name and card: the second folder read the first's rows."""
    first = _hub_folder(tmp_path / "a" / "ds")
    rows = [{"idx": "x1", "question": "If rivers ran uphill, where would the sea be?", "answers": ["up"]}]
    second = hub_folder(tmp_path / "b" / "ds", {"dev": rows, "train": rows})
    assert (second / "README.md").read_text() == (first / "README.md").read_text()
    assert len(QuestionSource(file=f"hf:{first}").load()) == len(DEV)
    assert [e.qid for e in QuestionSource(file=f"hf:{second}").load()] == ["x1"]


def test_questions_runs_and_predictions_go_out_as_datasets_and_come_back(tmp_path):
    import ifqa

    dataset = ifqa.to_dataset(DEV)
    assert dataset.num_rows == len(DEV) and dataset[0]["answers"] == DEV[0].answers
    folder = hub_folder(tmp_path / "shared", {"dev": dataset})
    back = QuestionSource(file=f"hf:{folder}").load()
    assert [(e.qid, e.question, e.answers, e.context) for e in back] == [
        (e.qid, e.question, e.answers, e.context) for e in DEV
    ]
    run = tmp_path / "run.jsonl"
    ifqa.Pipeline(indexes=["demo:bm25"], k=3).run_to_file(DEV, run)
    shared_run = ifqa.to_dataset(run)
    assert shared_run.num_rows == len(DEV) and len(shared_run[0]["ctxs"]) == 3
    predictions = tmp_path / "preds.jsonl"
    predictions.write_text('{"qid": "1", "prediction": "x"}\n[1, 2]\n')
    with pytest.raises(IfqaError, match=r"preds.jsonl:2: each line must be a JSON object"):
        ifqa.to_dataset(predictions)


def test_a_card_naming_a_split_whose_files_are_gone_says_which_split(cli, tmp_path):
    """datasets says it "couldn't infer the same data file format for all splits"; ifqa names the split."""
    folder = _hub_folder(tmp_path / "set")
    (folder / "data" / "train-00000-of-00001.parquet").unlink()
    result = cli("data", "stats", "--questions", f"hf:{folder}")
    assert result.returncode == 1 and len(result.stderr.strip().splitlines()) == 1
    assert "the train split's files are missing (the card names data/train-*" in result.stderr
