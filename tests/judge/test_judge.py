"""`ifqa judge` and the judged report: verdicts per question through the reader's machinery, judge
accuracy beside EM, F1 and containment, and the judge's agreement with EM."""

import json
import os

import pytest

from ifqa.datasets.demo import load_demo
from ifqa.eval.significance import cohen_kappa
from ifqa.judge.run import parse_verdict
from tests.readers.fake_openai import FakeOpenAI

DEV = load_demo("dev")


@pytest.fixture
def env(tmp_path):
    return {**os.environ, "IFQA_CACHE_DIR": str(tmp_path / "cache"), "OPENAI_API_KEY": "sk-test"}


@pytest.fixture
def predictions(tmp_path):
    """Exact answers, paragraphs holding the gold answer, wrong answers and one empty prediction."""
    records = []
    for i, example in enumerate(DEV):
        gold = example.answers[0]
        prediction = [gold, f"Under the premise, it would be {gold}, as the passage implies.", "Atlantis", ""][i % 4]
        records.append({"qid": example.qid, "prediction": prediction})
    path = tmp_path / "preds.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def _judge(cli, env, server, predictions, out, *options):
    args = ["judge", "--predictions", predictions, "--model", "judge", "--base-url", server.url, "-o", out]
    return cli(*args, "--no-progress", "--json", *options, env=env)


def test_the_judge_scores_long_answers_that_exact_match_misses(cli, env, predictions, tmp_path):
    with FakeOpenAI({}) as server:
        out = tmp_path / "judged.jsonl"
        result = _judge(cli, env, server, predictions, out)
        assert result.returncode == 0, result.stderr
        assert len(server.requests) == 18  # the six empty predictions are judged "no" without asking
        report = json.loads(result.stdout.splitlines()[0])
        verdicts = [json.loads(line) for line in out.read_text().splitlines()]
        assert report["em"] == 25.0 and report["containment"] == 50.0 and report["judge_accuracy"] == 50.0
        assert report["judge_accuracy"] == 100 * sum(v["verdict"] for v in verdicts) / len(verdicts)  # recomputes
        said = {v["qid"]: v["verdict"] for v in verdicts}
        long_answers = [e.qid for i, e in enumerate(DEV) if i % 4 == 1]
        assert report["judge"]["disagreements"]["judge_yes_em_no"] == long_answers
        assert report["judge"]["kappa_em"] == cohen_kappa(
            [said[e.qid] for e in DEV], [i % 4 == 0 for i in range(len(DEV))]
        )
        assert all(v["reason"] and "Verdict" not in v["reason"] for v in verdicts if v.get("asked", True))
        manifest = json.loads((tmp_path / "judged.jsonl.manifest.json").read_text())
        assert manifest["judge"]["model"] == "judge" and len(manifest["judge"]["prompt_sha256"]) == 64
        # ifqa evaluate shows the same report from the files, in text too
        text = cli("evaluate", "--predictions", predictions, "--judgments", out, env=env).stdout
        assert "Judge accuracy" in text and "Containment" in text and "kappa with EM" in text
        # a rerun answers from the cache
        sent = len(server.requests)
        assert _judge(cli, env, server, predictions, out).returncode == 0 and len(server.requests) == sent


def test_a_judge_that_says_yes_to_everything_shows(cli, env, predictions, tmp_path):
    with FakeOpenAI({}) as server:
        server.judge_says = lambda prediction: "Looks right.\nVerdict: yes"
        result = _judge(cli, env, server, predictions, tmp_path / "yes.jsonl")
    report = json.loads(result.stdout.splitlines()[0])
    assert report["judge_accuracy"] == 75.0  # every answered question
    assert report["judge"]["kappa_em"] < 0.3 and len(report["judge"]["disagreements"]["judge_yes_em_no"]) == 12


@pytest.mark.parametrize("reply", ["Maybe, it depends.", "", "<think>hmm"])
def test_a_reply_with_no_verdict_is_recorded_unclear_and_the_run_goes_on(cli, env, predictions, tmp_path, reply):
    """A judge that gives no verdict does not stop the run: the reply is kept, unclear, counted as no,
    counted and named in the report (a rerun sends nothing: every reply is cached)."""
    with FakeOpenAI({}) as server:
        server.judge_says = lambda prediction: reply
        out = tmp_path / "j.jsonl"
        result = _judge(cli, env, server, predictions, out)
        assert result.returncode == 0, result.stderr
        sent = len(server.requests)
        assert _judge(cli, env, server, predictions, out).returncode == 0 and len(server.requests) == sent
    judgments = [json.loads(line) for line in out.read_text().splitlines()]
    asked = [j for j in judgments if j.get("asked", True)]
    assert asked and all(j["verdict"] is None and j["unclear"] is True for j in asked)
    report = json.loads(result.stdout.splitlines()[0])
    assert report["judge_accuracy"] == 0.0 and len(report["judge"]["unclear"]) == len(asked)
    assert f"unclear: {len(asked)}" in result.stdout


def test_predictions_for_other_questions_are_refused_before_any_request(cli, env, tmp_path):
    path = tmp_path / "other.jsonl"
    path.write_text(json.dumps({"qid": "nope-1", "prediction": "x"}) + "\n")
    with FakeOpenAI({}) as server:
        result = _judge(cli, env, server, path, tmp_path / "j.jsonl")
        assert result.returncode == 1 and "answer none of the" in result.stderr and not server.requests
    assert not (tmp_path / "j.jsonl").exists()


@pytest.mark.parametrize(
    "reply, verdict",
    [
        ("Reason.\nVerdict: yes", True),
        ("Verdict: no, wait.\nVerdict: **yes**", True),
        ("No.", False),
        ("yes", True),
        ("The answer is yes.", True),  # as SmolLM2 writes it
        ("**Verdict:** No", False),
        ("**Yes**, it names the gold answer.", True),
        ("The prediction is correct.", True),
        ("Incorrect: it names another city.", False),
        ("The prediction is not correct.", False),
        ("The prediction is wrong.", False),
        ("Final verdict - NO", False),
        ("YES - because it names the same city", True),
        ("No \u2014 it names another city.", False),
        ("Yes\u2013same city.", None),
        ("No-one could tell.", None),
        ("Maybe, it depends.", None),
        ("The answer is right", None),
        # a word is no verdict; a reply read two ways is unclear (issue #69)
        ("yes/no", None),
        ("Yes or no? No.", False),
        ("The prediction is correct, not wrong.", True),
        ("It is not wrong.", True),
        ("No doubt, it is correct.", True),
        ("It is correct. No, it is wrong.", None),
        # the answers compared are no verdict (a yes/no question's): the reply's own words decide
        ("The predicted answer is no, matching the gold answer.", None),
        ("The gold answer is yes and the prediction is correct.", True),
    ],
)
def test_verdicts_are_read_as_judges_write_them(reply, verdict):
    assert parse_verdict(reply) is verdict


def test_kappa_is_chance_corrected_agreement():
    assert cohen_kappa([True, False, True, False], [True, False, True, False]) == 1.0
    assert cohen_kappa([True] * 4, [True, False, True, False]) == 0.0  # always yes: no better than chance
    assert cohen_kappa([True, False], [False, True]) == -1.0


@pytest.mark.parametrize("shape", ["think", "open", "reasoning_content"])
def test_a_reasoning_judge_is_read_after_its_thinking(cli, env, predictions, tmp_path, shape):
    """The judge's verdict is read after its thinking, in the shapes servers send; a judge cut off while
    thinking is one line (every reply cached)."""
    from tests.readers.fake_openai import FakeOpenAI as Fake

    with Fake({}) as server:
        server.thinking = shape
        out = tmp_path / "judged.jsonl"
        result = _judge(cli, env, server, predictions, out, "--thinking", "on")
        assert result.returncode == 0, result.stderr
        assert json.loads(result.stdout.splitlines()[0])["judge_accuracy"] == 50.0
        verdicts = [json.loads(line) for line in out.read_text().splitlines()]
        assert all("Wait, reconsider" in v["reasoning"] for v in verdicts if v.get("asked", True))
        cut = _judge(cli, env, server, predictions, tmp_path / "cut.jsonl", "--thinking", "on", "--max-tokens", "12")
    assert cut.returncode == 0, cut.stderr  # cut off while thinking: unclear, and the run goes on
    judged = [json.loads(line) for line in (tmp_path / "cut.jsonl").read_text().splitlines()]
    assert all(j["unclear"] and j["reason"] == "cut off while thinking" for j in judged if j.get("asked", True))
