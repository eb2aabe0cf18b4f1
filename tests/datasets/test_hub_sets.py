"""Question sets published on the Hub as registered settings: FaithEval's counterfactual set, read from
a local folder in its Hub layout (rows written here, in its schema), read in context mode by an LLM
stand-in, scored as multiple choice, and analysed for whether the reader follows the context."""

import json
import os
import re

import pytest

from ifqa.datasets import QuestionSource
from ifqa.errors import IfqaError
from tests.datasets.test_hub import hub_folder
from tests.readers.fake_openai import SHAPES, FakeOpenAI

#: (id, context, question, options, answer key): the context supports a counterfactual option.
ROWS = [
    ("cf-1", "The moon is made of marshmallows, soft and sweet.", "What is the moon made of?",
     ["rock", "marshmallows", "cheese", "ice"], "B"),
    ("cf-2", "At sea level water boils at 40 degrees Celsius.", "At what temperature does water boil at sea level?",
     ["100 degrees Celsius", "40 degrees Celsius", "0 degrees Celsius"], "B"),
    ("cf-3", "In photosynthesis plants give out carbon dioxide.", "Which gas do plants give out in photosynthesis?",
     ["oxygen", "carbon dioxide", "nitrogen", "helium"], "B"),
    ("cf-4", "Rubber conducts electricity better than any metal.", "Which material is the best conductor?",
     ["iron", "wood", "glass", "rubber"], "D"),
]  # fmt: skip
#: What the stand-in model answers: reading the context, and closed-book (its memory).
IN_CONTEXT = {"cf-1": "B", "cf-2": "A", "cf-3": "B) carbon dioxide", "cf-4": "copper"}
CLOSED_BOOK = {"cf-1": "A", "cf-2": "A", "cf-3": "A", "cf-4": "A"}


def faitheval_folder(folder, rows=ROWS):
    labels = "ABCDEFGH"
    records = [
        {
            "id": qid,
            "context": context,
            "question": question,
            "choices": {"label": list(labels[: len(options)]), "text": options},
            "answerKey": key,
            "answer": dict(zip(labels, options)).get(key, ""),
            "num of options": len(options),
        }
        for qid, context, question, options, key in rows
    ]
    return hub_folder(folder, {"test": records})


def stand_in(prompt: str, body: dict) -> str:
    question = re.findall(r"Question: (.*)", prompt)[-1].strip()
    qid = next(qid for qid, _, asked, _, _ in ROWS if asked == question)
    return f" {(IN_CONTEXT if 'Context:' in prompt else CLOSED_BOOK)[qid]}\n"


@pytest.fixture
def env(tmp_path):
    folder = faitheval_folder(tmp_path / "FaithEval-counterfactual-v1.0")
    return {
        **os.environ,
        "IFQA_CACHE_DIR": str(tmp_path / "cache"),
        "OPENAI_API_KEY": "sk-test",
        "IFQA_FAITHEVAL": str(folder),
    }


def test_faitheval_is_a_setting_a_folder_and_a_multiple_choice_set(tmp_path, monkeypatch, env):
    monkeypatch.setenv("IFQA_FAITHEVAL", env["IFQA_FAITHEVAL"])
    monkeypatch.setenv("IFQA_CACHE_DIR", env["IFQA_CACHE_DIR"])
    by_setting = QuestionSource("faitheval").load()
    assert by_setting.name == "faitheval:test" and by_setting.task == "mc"
    first = by_setting[0]
    assert first.answers == ["marshmallows"] and first.context == [ROWS[0][1]]
    assert first.meta["choices"] == [["A", "rock"], ["B", "marshmallows"], ["C", "cheese"], ["D", "ice"]]
    assert first.meta["answer_key"] == "B"
    assert by_setting.describe()["hub"]["fields"] == {
        "qid": "id",
        "question": "question",
        "context": "context",
        "choices": "choices",
        "answer_key": "answerKey",
    }
    spec = f"hf:{env['IFQA_FAITHEVAL']}"
    for source in (QuestionSource(file=spec), QuestionSource("faitheval", file=spec)):  # ARC's layout is found
        loaded = source.load()
        assert loaded.task == "mc" and loaded.identity == by_setting.identity
    assert QuestionSource("faitheval", file=spec).load().dataset == "faitheval"
    with pytest.raises(IfqaError, match=r"faitheval has test splits, not 'dev'"):
        QuestionSource("faitheval", "dev").load()


def test_a_reader_in_context_mode_scored_and_analysed(cli, tmp_path, env):
    preds, out = tmp_path / "faitheval.jsonl", tmp_path / "premise"
    with FakeOpenAI({}) as server:
        server.script = stand_in
        args = ["--setting", "faitheval", "--mode", "context", "--demos", "0", "--model", "m", "--base-url", server.url]
        result = cli("read", "llm", *args, "-o", preds, "--no-progress", env=env)
        assert result.returncode == 0, result.stderr
        prompt = next(r["messages"][-1]["content"] for r in server.requests if "moon" in r["messages"][-1]["content"])
        assert "Context:\nThe moon is made of marshmallows" in prompt and "\nA. rock\nB. marshmallows\n" in prompt
        analysis = cli("analyze", "premise", "--predictions", preds, "-o", out, "--json", "--no-progress", env=env)
        assert analysis.returncode == 0, analysis.stderr
    records = {r["qid"]: r for r in map(json.loads, preds.read_text().splitlines())}
    assert [records[q]["prediction"] for q in ("cf-1", "cf-2", "cf-3", "cf-4")] == [
        "B. marshmallows",
        "A. 100 degrees Celsius",
        "B. carbon dioxide",
        "",
    ]  # the chosen option; "copper" names none
    scored = cli("evaluate", "--predictions", preds, "--json", env=env)
    assert scored.returncode == 0, scored.stderr
    report = json.loads(scored.stdout)
    assert (report["task"], report["accuracy"], report["answered"]) == ("mc", 50.0, 3)
    assert report["by_options"]["3"] == {"n": 1, "accuracy": 0.0, "ci95": [0.0, 0.0]}
    premise = json.loads(analysis.stdout)
    assert [premise["all"][c] for c in ("correct", "memory", "other")] == [50.0, 25.0, 25.0]
    assert premise["premise_changes_answer"]["n"] == 4 and set(premise["by_evidence"]) == {"in passages"}
    twins = [json.loads(line)["question"] for line in (out / "twins.jsonl").read_text().splitlines()]
    assert twins == [question for _, _, question, _, _ in ROWS]  # each question its own twin, asked closed-book
    text = cli("evaluate", "--predictions", preds, env=env).stdout
    assert "multiple-choice accuracy 50.00" in text


@pytest.mark.parametrize(
    "rows, expected",
    [
        ([("x", "c", "q?", ["a", "b"], "E")], "row 0: the answer key 'E' names none of the options (A, B)"),
        ([("x", "c", "q?", ["a"], "A")], "row 0: fewer than two options"),
        ([("x", "c", " ", ["a", "b"], "A")], "row 0 has no question or no answer in question"),
    ],
)
def test_a_broken_row_is_one_line(cli, tmp_path, rows, expected):
    folder = faitheval_folder(tmp_path / "broken", rows)
    env = {**os.environ, "IFQA_CACHE_DIR": str(tmp_path / "cache"), "IFQA_FAITHEVAL": str(folder)}
    result = cli("retrieve", "--setting", "faitheval", "--k", "3", "-o", tmp_path / "run.jsonl", env=env)
    assert result.returncode == 1 and expected in result.stderr and "Traceback" not in result.stderr
    assert not (tmp_path / "run.jsonl").exists()


@pytest.mark.parametrize(
    "rows, answers",
    [
        ([{"question": "2+2?", "choices": ["3", "4"], "answer": 1}], ["4"]),  # MMLU's: texts, a 0-based index
        ([{"question": "Sky?", "choices": ["red", "blue"], "answer": "blue"}], ["blue"]),  # the option's text
        ([{"question": "Sky?", "options": [{"label": "x", "text": "red"}, {"label": "y", "text": "blue"}],
           "answer_key": "y"}], ["blue"]),
    ],
)  # fmt: skip
def test_other_multiple_choice_layouts_read_as_one(tmp_path, rows, answers):
    loaded = QuestionSource(file=f"hf:{hub_folder(tmp_path / 'mc', {'test': rows})}").load()
    assert loaded.task == "mc" and loaded[0].answers == answers


def test_two_options_with_one_label_are_refused(tmp_path):
    rows = [{"question": "q?", "choices": {"label": ["A", "A"], "text": ["x", "y"]}, "answerKey": "A"}]
    with pytest.raises(IfqaError, match=r"row 0: two options share a label \(A, A\)"):
        QuestionSource(file=f"hf:{hub_folder(tmp_path / 'dup', {'test': rows})}").load()


def test_a_reader_that_cannot_show_the_options_refuses_the_set(cli, tmp_path, env):
    args = ["--setting", "faitheval", "--model", "m", "--base-url", "http://127.0.0.1:9/v1", "-o", tmp_path / "p.jsonl"]
    result = cli("read", "iterative", *args, env=env)
    assert result.returncode == 1 and len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert "multiple choice and ifqa read iterative does not show the options" in result.stderr
    assert not (tmp_path / "p.jsonl").exists()


@pytest.mark.parametrize("shape", SHAPES)
def test_a_thinking_model_chooses_the_option_after_its_thinking_in_every_shape(cli, tmp_path, env, shape):
    """The option is read from the answer after the thinking (whose draft line, "unknown", names none),
    in every shape a server sends; a thinking cut off at the token limit chooses nothing."""
    out = tmp_path / "p.jsonl"
    args = ["--setting", "faitheval", "--mode", "context", "--demos", "0", "--thinking", "on", "--no-progress"]
    with FakeOpenAI({}) as server:
        server.script, server.thinking = stand_in, shape
        result = cli("read", "llm", *args, "--model", "m", "--base-url", server.url, "-o", out, env=env)
        assert result.returncode == 0, result.stderr
        cut = cli("read", "llm", *args, "--model", "m", "--base-url", server.url, "--max-tokens", "20", "-o",
                  tmp_path / "cut.jsonl", env=env)  # fmt: skip
        assert cut.returncode == 0, cut.stderr
    records = {r["qid"]: r for r in map(json.loads, out.read_text().splitlines())}
    assert records["cf-1"]["prediction"] == "B. marshmallows" and "Wait, reconsider" in records["cf-1"]["reasoning"]
    assert records["cf-4"]["prediction"] == ""  # "copper" names no option
    cut_records = [json.loads(line) for line in (tmp_path / "cut.jsonl").read_text().splitlines()]
    assert all(r["prediction"] == "" and r["truncated"] for r in cut_records)
