"""Iterative reading against scripted stand-in models: ones that search then answer, answer at once,
never stop, write malformed or empty tags, search for what retrieves nothing, or repeat a query."""

import json
import os
import re

import pytest

from ifqa.datasets.demo import load_demo
from tests.readers.fake_openai import FakeOpenAI

DEV = load_demo("dev")
GOLD = {e.question: e.answers[0] for e in DEV}


@pytest.fixture
def env(cache_with_demo_index):
    return {**os.environ, "IFQA_CACHE_DIR": str(cache_with_demo_index), "OPENAI_API_KEY": "sk-test"}


def _question(prompt: str) -> str:
    return re.search(r"Question: (.*)", prompt).group(1).strip()


def _results(prompt: str) -> int:
    """Result blocks the prompt holds (the instruction names the tag too, never followed by a line break)."""
    return prompt.count("<result>\n")


def searcher(prompt: str, body: dict) -> str:
    """Searches the main clause, then the premise, then answers (the stop leaves </search> out)."""
    question = _question(prompt)
    searches = _results(prompt)
    if searches == 0:
        return f"I need the facts. <search>{question.split(',')[-1]}</search>"
    if searches == 1:
        return f"And the premise. <search>{question.split(',')[0]}</search>"
    return f"Now I know. <answer>{GOLD[question]}</answer>"


SCRIPTS = {
    "searches then answers": searcher,
    "answers at once": lambda prompt, body: f"<answer>{GOLD[_question(prompt)]}</answer>",
    "never stops": lambda prompt, body: f"More. <search>step {_results(prompt)} river</search>",
    "empty tags": lambda prompt, body: "Hmm. <search>   </search>",
    "malformed tags": lambda prompt, body: "I will <serch>river</serch> later.",
    "nothing found": lambda prompt, body: (
        "<search>zzzqqqxxv</search>" if not _results(prompt) else f"<answer>{GOLD[_question(prompt)]}</answer>"
    ),
    "repeats itself": lambda prompt, body: (
        "<search>the river</search>" if _results(prompt) < 2 else f"<answer>{GOLD[_question(prompt)]}</answer>"
    ),
}


def _read(cli, env, out, server, *options):
    args = ["read", "iterative", "--model", "m", "--base-url", server.url, "-o", out, "--no-progress", *options]
    result = cli(*args, env=env)
    assert result.returncode == 0, result.stderr
    return [json.loads(line) for line in out.read_text().splitlines()]


@pytest.mark.parametrize("case", SCRIPTS)
def test_scripted_models(cli, env, tmp_path, case):
    with FakeOpenAI({}) as server:
        server.script = SCRIPTS[case]
        records = _read(cli, env, tmp_path / "p.jsonl", server, "--max-steps", "4")
        bodies = list(server.requests)
    assert len(records) == len(DEV) and all(r["steps"] for r in records)
    assert bodies[0]["stop"] == ["</search>", "</answer>"]
    right = sum(r["prediction"] == GOLD[e.question] for r, e in zip(records, DEV))
    stopped = {r["stopped"] for r in records}
    if case in ("searches then answers", "answers at once", "nothing found", "repeats itself"):
        assert right == len(DEV) and stopped == {"answer"}
    else:  # the budget stops it, with no answer (never its last search request)
        assert stopped == {"budget"} and all(len(r["steps"]) == 4 and r["prediction"] == "" for r in records)
    if case == "searches then answers":
        assert all(r["searches"] == 2 and len(r["steps"]) == 3 for r in records)
        assert all(s["query"] and isinstance(s["passages"], list) for r in records for s in r["steps"][:2])
        assert "<result>" in records[0]["reasoning"] and "[1]" in records[0]["reasoning"]
    if case == "never stops":
        assert all(r["searches"] == 4 for r in records)
    if case == "empty tags":
        assert all(s.get("note") == "empty query" and "passages" not in s for r in records for s in r["steps"])
    if case == "malformed tags":
        assert all(s.get("note") == "no search or answer tag" for r in records for s in r["steps"])
    if case == "nothing found":
        assert (
            all(r["steps"][0]["passages"] == [] for r in records) and "(no passages found)" in records[0]["reasoning"]
        )
    if case == "repeats itself":
        assert all(r["searches"] == 1 and r["steps"][1].get("repeated") for r in records)
        assert "(searched before: see above)" in records[0]["reasoning"]


def test_steps_are_scored_and_a_rerun_sends_nothing(cli, env, tmp_path):
    with FakeOpenAI({}) as server:
        server.script = searcher
        out = tmp_path / "p.jsonl"
        _read(cli, env, out, server, "--index", "demo:bm25", "--k", "2")
        sent, first = len(server.requests), out.read_bytes()
        assert sent == 3 * len(DEV)
        _read(cli, env, out, server, "--index", "demo:bm25", "--k", "2")
        assert len(server.requests) == sent and out.read_bytes() == first
    report = json.loads(cli("evaluate", "--predictions", out, "--json", env=env).stdout)
    assert report["em"] == 100.0
    steps = report["iterative"]
    records = [json.loads(line) for line in out.read_text().splitlines()]
    seen_gold = [any(p["gold"] for s in r["steps"] for p in s.get("passages", [])) for r in records]
    assert steps["gold_recall_all_steps"] == round(100 * sum(seen_gold) / len(records), 2)  # recomputes from the file
    assert steps["steps_per_question"] == 3.0 and steps["searches_per_question"] == 2.0
    assert steps["gold_recall_all_steps"] >= steps["gold_recall_first_search"]
    manifest = json.loads((tmp_path / "p.jsonl.manifest.json").read_text())
    assert manifest["reader"] == "iterative" and manifest["host_ms_per_step"] < 1000


def test_ircot_retrieves_with_the_question_then_each_sentence(cli, env, tmp_path):
    def sentences(prompt, body):
        reasoning = prompt.split("Reasoning so far:")[1].split("Next sentence:")[0].strip()
        if not reasoning:
            return "The premise moves the city to the east coast.\nmore text"
        return f"So the answer is: {GOLD[_question(prompt)]}."

    with FakeOpenAI({}) as server:
        server.script = sentences
        records = _read(cli, env, tmp_path / "p.jsonl", server, "--protocol", "ircot")
        assert server.requests[0]["stop"] == ["\n"]
    assert all(r["prediction"] == GOLD[e.question] for r, e in zip(records, DEV))
    assert all(
        r["steps"][0]["query"] == e.question and r["steps"][1]["query"].startswith("The premise")
        for r, e in zip(records, DEV)
    )


@pytest.mark.parametrize(
    "options, expected",
    [(["--max-steps", "0"], "--max-steps must be at least 1"), (["--index", "no/such/index"], "no/such/index")],
)
def test_bad_settings_are_one_line_and_write_nothing(cli, env, tmp_path, options, expected):
    with FakeOpenAI({}) as server:
        out = tmp_path / "p.jsonl"
        result = cli("read", "iterative", "--model", "m", "--base-url", server.url, "-o", out, *options, env=env)
        assert not server.requests
    assert result.returncode == 1 and expected in result.stderr and "Traceback" not in result.stderr
    assert not out.exists()


def test_a_reply_that_is_not_text_is_one_line(cli, env, tmp_path):
    with FakeOpenAI({}) as server:
        server.script = lambda prompt, body: "bad \ud800 reply"
        out = tmp_path / "p.jsonl"
        result = cli("read", "iterative", "--model", "m", "--base-url", server.url, "-o", out, env=env)
    assert result.returncode == 1 and "not valid Unicode" in result.stderr and not out.exists()


@pytest.mark.parametrize("shape", ["think", "open", "reasoning_content"])
def test_a_reasoning_model_searches_after_its_thinking(cli, env, tmp_path, shape):
    with FakeOpenAI({}) as server:
        server.script, server.thinking = searcher, shape
        records = _read(cli, env, tmp_path / "p.jsonl", server, "--thinking", "on")
        # the tags end a step wherever they stand, thinking included; no blank-line stop cuts its thinking
        assert server.requests[0]["stop"] == ["</search>", "</answer>"]
    assert all(r["prediction"] == GOLD[e.question] and r["searches"] == 2 for r, e in zip(records, DEV))
    assert not any("<result>" in s["text"] for r in records for s in r["steps"])  # a step ends at its search


def _window_run(cli, env, tmp_path, server, *options):
    out = tmp_path / "p.jsonl"
    args = ["read", "iterative", "--model", "m", "--base-url", server.url, "-o", out, "--no-progress", *options]
    result = cli(*args, env=env)
    assert result.returncode == 0, result.stderr
    return [json.loads(line) for line in out.read_text().splitlines()]


def test_the_passage_window_keeps_the_newest_passages(cli, env, tmp_path):
    """--passages 4 with --k 3: the prompt shows the newest four passages over all searches, the oldest
    leaving first; a later search's passages are always shown (never "no passages found")."""
    topics = ["river bridge", "president election", "city coast"]

    def three_searches(prompt, body):
        searches = _results(prompt)
        return f"<search>{topics[searches]}</search>" if searches < 3 else f"<answer>{GOLD[_question(prompt)]}</answer>"

    with FakeOpenAI({}) as server:
        server.script = three_searches
        records = _window_run(cli, env, tmp_path, server, "--k", "3", "--passages", "4")
        prompts = [body["messages"][-1]["content"] for body in server.requests]
    assert all(r["prediction"] == GOLD[e.question] for r, e in zip(records, DEV))
    by_question = {e.question: r for e, r in zip(DEV, records)}
    checked = 0
    for prompt in prompts:
        blocks = re.findall(r"<result>\n(.*?)\n</result>", prompt, re.S)
        if len(blocks) < 3:
            continue
        steps = by_question[_question(prompt)]["steps"]
        new = [[p["id"] for p in s["passages"]] for s in steps[:3]]
        window = set([i for ids in new for i in ids][-4:])
        for block, ids in zip(blocks, new):
            kept = [i for i in ids if i in window]
            if kept:
                assert len(block.splitlines()) == len(kept) and "left the prompt" not in block
            else:
                assert block == "(these passages left the prompt to make room for newer ones)" or not ids
        assert "(no passages found)" not in blocks[2] or not new[2]
        checked += 1
    assert checked == len(DEV)


def test_a_prompt_over_its_budget_drops_the_oldest_passages_and_a_grown_transcript_stops_the_question(
    cli, env, tmp_path
):
    talk = "I keep thinking about this at length. " * 12

    def talker(prompt, body):
        return f"{talk}<search>river step {_results(prompt)}</search>"

    with FakeOpenAI({}) as server:
        server.script = talker
        records = _window_run(cli, env, tmp_path, server, "--k", "3", "--max-prompt-tokens", "600", "--max-steps", "6")
        prompts = [body["messages"][-1]["content"] for body in server.requests]
    assert all(len(p) / 4 * 1.1 <= 600 for p in prompts)  # ifqa's token estimate without a tokenizer
    assert {r["stopped"] for r in records} == {"window"} and all(r["prediction"] == "" for r in records)
    assert all(len(r["steps"]) < 6 for r in records)


#: The model's text as data: what a search request may hold, and the query each must give.
ODD_SEARCHES = {
    "nested": ("Look. <search>river <search>bridge</search>", "bridge"),
    "unclosed then tags": ("Look. <search>river bridge <answer>x", "river bridge"),
    "tags inside": ("<search><b>river</b> <i>bridge</i></search>", "river bridge"),
    "a stray closing tag": ("<search>river</answer> bridge</search>", "river"),
}


@pytest.mark.parametrize("case", ODD_SEARCHES)
def test_a_query_never_holds_tag_text(cli, env, tmp_path, case):
    text, query = ODD_SEARCHES[case]

    def odd(prompt, body):
        return text if not _results(prompt) else f"<answer>{GOLD[_question(prompt)]}</answer>"

    with FakeOpenAI({}) as server:
        server.script = odd
        records = _read(cli, env, tmp_path / "p.jsonl", server, "--max-steps", "2")
    steps = [r["steps"][0] for r in records]
    assert all(s["query"] == query for s in steps), {s["query"] for s in steps}
    assert all("<search>" + query + "</search>" in r["reasoning"] for r in records)
    assert all(r["prediction"] == GOLD[e.question] for r, e in zip(records, DEV))


def test_an_answer_with_its_closing_tag_is_recorded_once(cli, env, tmp_path):
    with FakeOpenAI({}) as server:
        server.script = lambda prompt, body: f"Done. <answer>{GOLD[_question(prompt)]}</answer> trailing"
        records = _read(cli, env, tmp_path / "p.jsonl", server)
    assert all(
        r["reasoning"].count("</answer>") == 1 and r["prediction"] == GOLD[e.question] for r, e in zip(records, DEV)
    )
