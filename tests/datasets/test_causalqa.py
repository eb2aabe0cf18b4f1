"""Webis-CausalQA-22: the release's CSVs from a local HTTP server, the demo, and one-line errors."""

import zipfile
from importlib import resources

import pytest

from ifqa.datasets import QuestionSource
from ifqa.datasets.causalqa import download, load_file
from ifqa.errors import IfqaError

DEMO = resources.files("ifqa.demo") / "causalqa" / "original-splits"
HEADER = "id,question,question_processed,context,context_processed,answer,answer_processed\n"


def test_demo_loads_every_source_with_context_and_several_answers():
    dev = QuestionSource("causalqa-demo", "dev").load()
    assert dev.task == "causalqa" and len(dev) == 8
    sources = {e.meta["source"] for e in dev}
    assert sources == {"squad2", "gooaq"}
    squad = [e for e in dev if e.meta["source"] == "squad2"]
    assert all(len(e.context) == 1 for e in squad) and all(not e.context for e in dev if e.meta["source"] == "gooaq")
    assert squad[0].answers == ["ice is less dense than liquid water", "it is less dense"]  # tab-separated answers
    assert squad[0].qid == "squad2:squad2-valid-0" and squad[0].question == "why does ice float on water"


def test_download_extracts_the_input_csvs_and_skips_id_only_sources(http_server, tmp_path, caplog):
    root, url = http_server
    with zipfile.ZipFile(root / "causalqa.zip", "w") as archive:
        for path in DEMO.iterdir():
            archive.writestr(f"Webis-CausalQA-22-v-1.0/input/original-splits/{path.name}", path.read_text())
            archive.writestr(
                f"Webis-CausalQA-22-v-1.0/input/random-splits/{path.name.replace('original', 'random')}",
                path.read_text(),
            )
        archive.writestr("Webis-CausalQA-22-v-1.0/input/original-splits/eli5_valid_original_split.csv", "id\ne1\ne2\n")
        archive.writestr("Webis-CausalQA-22-v-1.0/models/original-splits/paq/config.json", "{}")
    paths = download(tmp_path / "data", f"{url}/causalqa.zip", progress=False)
    assert len(paths) == 9 and not any("models" in str(p) for p in paths)
    data = str(tmp_path / "data")
    dev = QuestionSource("causalqa", "dev", None, data).load()
    assert len(dev) == 8 and "eli5" in caplog.text  # ELI5's ids-only file is skipped, with a warning
    assert len(QuestionSource("causalqa-random", "train", None, data).load()) == 8


@pytest.mark.parametrize(
    "content, message",
    [
        (
            "id,context,answer\n1,c,a\n",
            ":1: missing column question_processed or question (the question); found: id, context, answer",
        ),
        ("id,question\n1,q\n", ":1: missing column answer or answer_processed (the answers)"),
        (HEADER + "1,q,q,c,c,a,a,extra\n", ":2: 8 fields, the header has 7"),
        (HEADER + "1,q,q,c,c,a,a\n1,r,r,c,c,b,b\n", ":3: duplicate id 'squad2:1' (first on line 2)"),
    ],
)
def test_bad_csvs_are_one_line_errors(tmp_path, cli, content, message):
    path = tmp_path / "squad2_valid_original_split.csv"
    path.write_text(content)
    with pytest.raises(IfqaError, match=message.replace("(", r"\(").replace(")", r"\)")):
        load_file(path)
    out = tmp_path / "pred.jsonl"
    result = cli("read", "majority", "--setting", "causalqa-demo", "--questions", path, "-o", out)
    assert result.returncode == 1 and result.stderr.strip().count("\n") == 0 and not out.exists()


def test_a_bad_encoding_names_the_line(tmp_path):
    path = tmp_path / "gooaq_train_original_split.csv"
    path.write_bytes(HEADER.encode() + b"1,why,why,,,because,because\n2,caf\xe9?,cafe,,,x,x\n")
    with pytest.raises(IfqaError, match=r"gooaq_train_original_split.csv:3: not UTF-8 text"):
        load_file(path)
