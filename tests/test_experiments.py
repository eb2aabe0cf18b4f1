import pytest

from ifqa.datasets.demo import load_demo
from ifqa.errors import IfqaError
from ifqa.experiments import compare, load_config, premise_effect, run_experiment, side_by_side, split_premise
from tests.readers.fake_openai import FakeOpenAI

DEV = load_demo("dev")
ANSWERS = {e.question: e.answers[0] for e in DEV + load_demo("train")}


@pytest.fixture
def cache(monkeypatch, cache_with_demo_index):
    monkeypatch.setenv("IFQA_CACHE_DIR", str(cache_with_demo_index))
    monkeypatch.setenv("OPENAI_API_KEY", "k")


def _config(tmp_path, server_url, model="m", mode_closed="qa"):
    path = tmp_path / "exp.yaml"
    path.write_text(f"""
name: t
questions: {{setting: demo, split: dev}}
output: out
k: 10
retrievers:
  - {{name: bm25, indexes: ["demo:bm25"]}}
readers:
  - {{name: closed, mode: {mode_closed}, model: "{model}", base_url: "{server_url}", demos: 2, paper: {{em: 25.25, f1: 32.91}}}}
  - {{name: open, mode: open, retriever: bm25, passages: 3, model: "{model}", base_url: "{server_url}", demos: 1}}
  - {{name: fid, reader: fid, retriever: bm25, checkpoint: "${{IFQA_NO_SUCH_VARIABLE}}", paper: {{em: 36.2}}}}
""")
    return path


def test_runs_the_grid_and_skips_up_to_date_stages(cache, tmp_path):
    with FakeOpenAI(ANSWERS) as server:
        config = _config(tmp_path, server.url)
        results = run_experiment(config, progress=False)
        assert [r["status"] for r in results["readers"]] == ["ran", "ran", "skipped: no checkpoint configured"]
        assert results["readers"][0]["em"] == 100.0 and results["retrievers"][0]["recall"]["gold"]["10"] > 50
        sent = len(server.requests)
        assert sent == 48
        run_file = tmp_path / "out" / "runs" / "bm25-k10.jsonl"
        stamp = run_file.stat().st_mtime_ns
        run_experiment(config, progress=False)
        assert len(server.requests) == sent and run_file.stat().st_mtime_ns == stamp  # nothing was redone
        run_experiment(_config(tmp_path, server.url, mode_closed="cot"), progress=False)
        assert len(server.requests) == sent + 24  # only the changed reader ran again
    markdown = (tmp_path / "out" / "results.md").read_text()
    assert "| closed | none | 100.00 |" in markdown and "25.25 / 32.91" in markdown
    assert "skipped: no checkpoint configured: `ifqa read fid --checkpoint CHECKPOINT --run " in markdown
    rows = (tmp_path / "out" / "results.csv").read_text().splitlines()
    assert rows[0].startswith("system,kind") and len(rows) == 5


def test_missing_model_is_a_skipped_row_with_its_command(cache, tmp_path):
    results = run_experiment(_config(tmp_path, "http://127.0.0.1:9/v1", model=""), progress=False)
    assert all(r["status"].startswith("skipped") for r in results["readers"])
    command = results["readers"][1]["command"]
    assert command.startswith(
        "ifqa read llm --model MODEL --base-url http://127.0.0.1:9/v1 --mode open --passages 3 --demos 1 --run "
    )
    assert command.endswith("bm25-k10.jsonl --setting demo --split dev")


def test_config_errors_are_one_line(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: x\nquestions: [unclosed\n")
    with pytest.raises(IfqaError, match=r"bad\.yaml:\d+: invalid YAML"):
        load_config(bad)
    bad.write_text("name: x\nquestions: {setting: demo}\nreaders:\n  - {name: r, retriever: nope}\n")
    with pytest.raises(IfqaError, match="'retriever' must name an earlier retrieve stage, got 'nope'"):
        load_config(bad)
    bad.write_text("name: x\nquestions: {setting: demo}\nreaders:\n  - {name: r, modle: qa}\n")
    with pytest.raises(IfqaError, match="unknown key"):
        load_config(bad)


def test_comparison_helpers():
    a = {e.qid: e.answers[0] for e in DEV}
    b = {e.qid: (e.answers[0] if i < 6 else "no") for i, e in enumerate(DEV)}
    result = compare(DEV, a, b)
    assert result["em"]["difference"] == 75.0 and result["em"]["p_value"] < 0.001
    rows = side_by_side(DEV, {"a": a, "b": b}, limit=3)
    assert len(rows) == 3 and all(row["a"].endswith("✓") and row["b"].endswith("✗") for row in rows)
    assert split_premise("If X were Y, what would Z be?") == ("If X were Y", "what would Z be?")
    assert split_premise("What is Z?") == ("", "What is Z?")


def test_premise_effect_on_the_demo(cache):
    from ifqa.retrieval.specs import open_index

    effect = premise_effect(open_index("demo:bm25"), DEV, k=5)
    assert 0 <= effect["main clause only"] <= effect["whole question"] <= 100
    assert isinstance(effect["misled by the premise"], list)


def test_samples_vote_over_sampled_answers_in_experiments(cache, tmp_path):
    """Self-consistency through the runner sends the sampling temperature, as the CLI does."""
    path = tmp_path / "sc.yaml"
    with FakeOpenAI(ANSWERS) as server:
        path.write_text(f"""
name: sc
questions: {{setting: demo, split: dev}}
output: out
readers:
  - {{name: vote, mode: qa, model: m, base_url: "{server.url}", demos: 1, samples: 3}}
  - {{name: warm, mode: qa, model: m, base_url: "{server.url}", demos: 1, temperature: 0.3}}
""")
        results = run_experiment(path, progress=False)
        temperatures = [r["temperature"] for r in server.requests]
    assert results["readers"][0]["status"] == "ran"
    assert temperatures[: 3 * 24] == [0.7] * (3 * 24) and set(temperatures[3 * 24 :]) == {0.3}


def test_stages_list_with_an_evaluate_stage(cache, tmp_path):
    predictions = tmp_path / "p.jsonl"
    predictions.write_text("".join(f'{{"qid": "{e.qid}", "prediction": "{e.answers[0]}"}}\n' for e in DEV))
    path = tmp_path / "st.yaml"
    path.write_text(f"""
name: st
questions: {{setting: demo, split: dev}}
output: out
stages:
  - {{stage: retrieve, name: main, indexes: ["demo:bm25"], query_mode: main-clause, k: 5}}
  - {{stage: evaluate, name: given, predictions: {predictions}}}
""")
    results = run_experiment(path, progress=False)
    assert results["retrievers"][0]["depth"] == 5 and results["readers"][0]["em"] == 100.0
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: x\nquestions: {setting: demo}\nstages:\n  - {stage: bake, name: b}\n")
    with pytest.raises(IfqaError, match="unknown type 'bake'; choose from retrieve, read, evaluate"):
        load_config(bad)


@pytest.mark.parametrize("name, metric", [("wiqa", "accuracy"), ("causalqa", "rouge_l_f1")])
def test_wiqa_and_causalqa_experiments_score_with_their_own_metric(cache, tmp_path, monkeypatch, name, metric):
    import shutil
    from pathlib import Path

    from ifqa.datasets import QuestionSource

    config = tmp_path / f"{name}.yaml"
    shutil.copy(Path(__file__).resolve().parents[1] / "experiments" / f"{name}.yaml", config)
    dev = QuestionSource(f"{name}-demo", "dev").load()
    answers = {e.question: e.answers[0].replace("_", " ") for e in dev}
    with FakeOpenAI(answers) as server:
        monkeypatch.setenv("IFQA_LLM_MODEL", "m")
        monkeypatch.setenv("IFQA_LLM_BASE_URL", server.url)
        results = run_experiment(config, progress=False)
    assert results["task"] == name and all(r["status"] == "ran" for r in results["readers"])
    reading = {"wiqa": "llm-paragraph", "causalqa": "llm-with-context"}[name]  # the question's own passage given
    llm = next(r for r in results["readers"] if r["name"] == reading)
    assert llm[metric] == 100.0  # the fake model knows every answer
    markdown = (tmp_path / "results" / name / "results.md").read_text()
    assert ("by question type" if name == "wiqa" else "by source") in markdown


@pytest.mark.parametrize(
    "text, problem, line",
    [
        (
            "name: a\nquestions: {setting: demo}\nname: b\nstages: [{stage: retrieve, name: r}]\n",
            "'name' given twice",
            3,
        ),
        (
            "name: a\nquestions: {setting: demo}\nstages:\n  - stage: retrieve\n    name: r\n    k: 5\n    k: 10\n",
            "'k' given twice",
            7,
        ),
        ("name: a\nquestions: {setting: demo}\nstage:\n  - {stage: retrieve, name: r}\n", "unknown key 'stage'", 3),
        ("name: a\nquestions: {setting: demo}\n7: x\nstages: [{stage: retrieve, name: r}]\n", "key 7 is not a name", 3),
        ("name: a\nquestions: {setting: demo}\n", "no stages", None),
    ],
)
def test_yaml_that_would_be_read_wrongly_is_refused_with_its_line(tmp_path, text, problem, line):
    """Duplicate keys (the last would win), unknown top-level keys (a typo of 'stages' ran nothing),
    keys that are not names, and an experiment of no stages: one error naming the file and line."""
    from ifqa.experiments.config import load_config

    path = tmp_path / "exp.yaml"
    path.write_text(text)
    where = rf"exp\.yaml:{line}: " if line else r"exp\.yaml: "
    with pytest.raises(IfqaError, match=where + ".*" + problem):
        load_config(path)


def test_yaml_merge_keys_may_be_overridden(tmp_path):
    """A key given again beside a merge ('<<') overrides the merged one: that is no duplicate."""
    from ifqa.experiments.config import load_config

    path = tmp_path / "exp.yaml"
    path.write_text(
        "name: a\nquestions: {setting: demo}\nstages:\n"
        "  - <<: {stage: retrieve, indexes: [demo:bm25], k: 5}\n    name: r\n    k: 10\n"
    )
    assert load_config(path)["_stages"][0]["k"] == 10


def test_retrievers_of_different_depths_share_one_table(cache, tmp_path):
    """Two retrieve stages with different k: each row shows the depths it has, "–" where it has none;
    without a `compare_to` stage there are no empty Δ columns."""
    path = tmp_path / "k.yaml"
    path.write_text("""
name: depths
questions: {setting: demo, split: dev}
output: out
stages:
  - {stage: retrieve, name: shallow, indexes: ["demo:bm25"], k: 5}
  - {stage: retrieve, name: deep, indexes: ["demo:bm25"], k: 20}
""")
    run_experiment(path, progress=False)
    markdown = (tmp_path / "out" / "results.md").read_text()
    shallow = next(line for line in markdown.splitlines() if line.startswith("| shallow |"))
    deep = next(line for line in markdown.splitlines() if line.startswith("| deep |"))
    assert shallow.count("–") >= 1 and "–" not in deep
    assert "compare_to" not in markdown and "Δ" not in markdown


def test_a_device_is_no_experiment_and_home_is_expanded(cache, tmp_path, monkeypatch):
    with pytest.raises(IfqaError, match="not a regular file"):
        load_config("/dev/zero")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    path = tmp_path / "h.yaml"
    path.write_text(
        "name: h\nquestions: {setting: demo, split: dev}\noutput: ~/results\nretrievers:\n"
        "  - {name: bm25, indexes: ['demo:bm25'], k: 3}\n"
    )
    run_experiment(path, progress=False)
    assert (tmp_path / "home" / "results" / "results.md").exists() and not (tmp_path / "~").exists()


def test_an_experiments_results_never_hold_its_own_yaml(cache, tmp_path):
    path = tmp_path / "own.yaml"
    path.write_text(
        "name: own\nquestions: {setting: demo, split: dev}\noutput: .\nretrievers:\n"
        "  - {name: bm25, indexes: ['demo:bm25'], k: 3}\n"
    )
    with pytest.raises(IfqaError, match="is a folder holding the input the experiment"):
        run_experiment(path, progress=False)


def test_a_judge_in_the_yaml_judges_every_reader_once(cache, tmp_path):
    with FakeOpenAI(ANSWERS) as server:
        config = _config(tmp_path, server.url)
        config.write_text(config.read_text() + f'judge: {{model: judge, base_url: "{server.url}"}}\n')
        results = run_experiment(config, progress=False)
        ran = [r for r in results["readers"] if r["status"] == "ran"]
        assert [r["judge_accuracy"] for r in ran] == [100.0, 100.0] and ran[0]["judge"]["kappa_em"] == 1.0
        sent = len(server.requests)
        assert sent == 48 + 24  # both readers answered alike: the second one's verdicts come from the cache
        run_experiment(config, progress=False)
        assert len(server.requests) == sent  # verdicts kept beside the predictions
    markdown = (tmp_path / "out" / "results.md").read_text()
    assert "Judge | Judge 95% CI" in markdown and "Containment" in markdown
    assert "judge_kappa_em" in (tmp_path / "out" / "results.csv").read_text().splitlines()[0]
    assert (tmp_path / "out" / "predictions" / "closed.judgments.jsonl").exists()


def test_an_iterative_reader_is_a_stage(cache, tmp_path):
    from tests.readers.test_iterative import searcher

    with FakeOpenAI(ANSWERS) as server:
        server.script = searcher
        config = tmp_path / "exp.yaml"
        config.write_text(
            "name: it\nquestions: {setting: demo, split: dev}\noutput: out\n"
            f'readers:\n  - {{name: search, reader: iterative, model: m, base_url: "{server.url}", '
            "indexes: [demo:bm25], k: 2, max_steps: 4}\n"
        )
        results = run_experiment(config, progress=False)
        assert len(server.requests) == 3 * len(DEV)
    [row] = results["readers"]
    assert row["status"] == "ran" and row["em"] == 100.0
    assert "ifqa read iterative --model m" in row["command"] and "--k 2" in row["command"]


def test_a_renamed_key_is_read_with_a_note_in_every_stage_that_takes_it(tmp_path, caplog):
    """Every config an experiment row is read into (retrieve stages, every reader), every field it
    renamed: the former key (``rerank_backend``) is read as the new one, with a note, for a release."""
    from ifqa.configs import field_default, option_fields
    from ifqa.registry import READERS
    from ifqa.retrieval.config import RetrievalConfig

    configs = [("retrieve", RetrievalConfig, {"indexes": ["demo:bm25"]})]
    configs += [("read", READERS.get(name).config, {"reader": name}) for name in READERS.names()]
    renamed = [
        (stage, field, base)
        for stage, config, base in configs
        for field in option_fields(config)
        if field.metadata.get("renamed_from")
    ]
    assert any(field.metadata["renamed_from"] == "rerank_backend" for _, field, _ in renamed)
    for n, (stage, field, base) in enumerate(renamed):
        old = field.metadata["renamed_from"]
        value = field_default(field) or next(iter(field.metadata.get("choices") or ["x"]))
        path = tmp_path / f"renamed-{n}.yaml"
        row = {"stage": stage, "name": "s", **base, old: value}
        path.write_text(f"name: renamed\nquestions: {{setting: demo, split: dev}}\nstages:\n  - {row}\n")
        with caplog.at_level("WARNING", logger="ifqa"):
            config = load_config(path)
        assert config["_stages"][0][old] == value  # accepted as written; read as the new name below
        assert f"'{old}' is now '{field.name}'" in caplog.text


def test_the_experiments_training_file_reaches_every_reader_that_reads_one(tmp_path):
    """``train: {file: ...}`` at the top of an experiment is the training pool of every reader with a
    ``train`` setting (the majority reader's too), not only the LLM reader's."""
    import json

    questions = tmp_path / "q.jsonl"
    train = tmp_path / "train.jsonl"
    dev = load_demo("dev")
    questions.write_text(
        "".join(json.dumps({"idx": e.qid, "question": e.question, "answers": e.answers}) + "\n" for e in dev)
    )
    train.write_text(
        "".join(json.dumps({"idx": f"t{i}", "question": f"q{i}?", "answers": ["Lyon"]}) + "\n" for i in range(3))
    )
    config = tmp_path / "exp.yaml"
    config.write_text(
        "name: t\nquestions: {file: q.jsonl}\ntrain: {file: train.jsonl}\noutput: out\n"
        "stages:\n  - {stage: read, name: majority, reader: majority}\n"
    )
    results = run_experiment(config, progress=False)
    [row] = results["readers"]
    assert row["status"] == "ran"
    predictions = [
        json.loads(line) for line in (tmp_path / "out" / "predictions" / "majority.jsonl").read_text().splitlines()
    ]
    assert {p["prediction"] for p in predictions} == {"Lyon"}
