"""The public Python API (``ifqa.api``, importable from ``ifqa``): its docstring examples run here,
and the objects give what the command line writes."""

import doctest
import json
import subprocess
import sys

import pytest

import ifqa
from ifqa import api


def test_docstring_examples_run():
    from ifqa import evaluation

    results = [doctest.testmod(module, optionflags=doctest.ELLIPSIS) for module in (api, evaluation)]
    assert sum(tried for _, tried in results) >= 15 and sum(failures for failures, _ in results) == 0


def test_import_ifqa_is_cheap_and_lists_its_names():
    code = "import sys, ifqa; print(sorted(m for m in ('torch', 'numpy', 'ifqa.api', 'click') if m in sys.modules))"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True).stdout.strip() == "[]"
    assert {"Pipeline", "open_index", "load_questions", "evaluate_run", "RetrievalConfig"} <= set(dir(ifqa))
    assert ifqa.Pipeline is api.Pipeline
    # ifqa lists api's names itself (reading api.__all__ would import it): the two lists agree
    assert set(api.__all__) <= set(dir(ifqa)) and all(getattr(ifqa, name) is not None for name in ifqa.__all__)
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        ifqa.nope  # noqa: B018 - the lookup is the test


def test_pipeline_writes_what_ifqa_retrieve_writes(tmp_path, cli):
    assert (
        cli("retrieve", "--k", "5", "--query-mode", "clean", "-o", tmp_path / "cli.jsonl", "--no-progress").returncode
        == 0
    )
    records = ifqa.Pipeline(ifqa.RetrievalConfig(k=5, query_mode="clean")).run_to_file(
        ifqa.load_questions(), tmp_path / "api.jsonl"
    )
    assert (tmp_path / "api.jsonl").read_bytes() == (tmp_path / "cli.jsonl").read_bytes()
    assert ifqa.evaluate_run(tmp_path / "api.jsonl") == ifqa.evaluate_run(records)


def test_searcher_hits_are_passages_in_rank_order():
    searcher = ifqa.open_index("demo:bm25")
    hits = searcher.search("Which river flows past the town?", k=4)
    assert [h.rank for h in hits] == [1, 2, 3, 4] and hits[0].score >= hits[-1].score
    assert searcher.passage(0)["id"] and len(searcher) > 4000
    assert hits[0].as_context()["id"] == hits[0].id and searcher.batch_search([], 3) == []


def test_reranking_through_the_api_reorders_the_head_only(tmp_path):
    """The question-agnostic control is a reranker like a cross-encoder (no torch model needed)."""
    import numpy as np

    from ifqa.retrieval import control

    folder = tmp_path / "control"
    folder.mkdir()
    np.save(folder / control.WEIGHTS, np.zeros(control.N_FEATURES))
    (folder / control.SETTINGS).write_text(
        json.dumps({"n_features": control.N_FEATURES, "intercept": 0.0, "weight": 0.5})
    )
    hits = ifqa.open_index("demo:bm25").search("bridge", k=6)
    reranked = ifqa.Reranker(folder, depth=3).rerank("bridge", hits)
    assert [h.id for h in reranked[3:]] == [h.id for h in hits[3:]] and [h.rank for h in reranked] == list(range(1, 7))
    assert sorted(h.id for h in reranked[:3]) == sorted(h.id for h in hits[:3])


def test_one_reranker_serves_the_api_the_pipeline_and_a_progress_bar(tmp_path):
    """The same reranker object reorders hits by hand, with a progress bar, and inside a pipeline:
    one interface, the same order and scores."""
    import numpy as np

    from ifqa.retrieval import control

    folder = tmp_path / "control"
    folder.mkdir()
    np.save(folder / control.WEIGHTS, np.linspace(-1, 1, control.N_FEATURES))
    (folder / control.SETTINGS).write_text(
        json.dumps({"n_features": control.N_FEATURES, "intercept": 0.0, "weight": 2.0})
    )
    questions = [e.question for e in ifqa.load_questions("demo", "dev")][:5]
    reranker = ifqa.Reranker(folder, depth=4)
    first = ifqa.Pipeline(k=6).batch_search(questions)
    by_hand = reranker.rerank_many(questions, first)
    assert reranker.rerank_many(questions, first, progress=True) == by_hand
    assert ifqa.Pipeline(k=6, rerankers=[reranker]).batch_search(questions) == by_hand
    assert by_hand != first  # the control moved something


def test_evaluate_predictions_accepts_files_mappings_and_records(tmp_path):
    dev = ifqa.load_questions("demo", "dev")
    records = [{"qid": e.qid, "prediction": "wrong"} for e in dev]
    path = tmp_path / "p.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    assert ifqa.evaluate_predictions(path, dev)["em"] == ifqa.evaluate_predictions(records, dev)["em"] == 0.0
    assert ifqa.evaluate_predictions({e.qid: e.answers[0] for e in dev}, dev)["f1"] == 100.0


def test_evaluate_predictions_scores_each_dataset_by_its_own_task(tmp_path, cli):
    """WIQA is scored by accuracy per question type, as `ifqa evaluate` does, on objects as on files."""
    wiqa = ifqa.load_questions("wiqa-demo", "dev")
    labels = {e.qid: (e.answers[0] if i % 2 else "no effect") for i, e in enumerate(wiqa)}
    report = ifqa.evaluate_predictions(labels, wiqa)
    path = tmp_path / "wiqa.jsonl"
    path.write_text("".join(json.dumps({"qid": q, "prediction": a}) + "\n" for q, a in labels.items()))
    result = cli("evaluate", "--predictions", path, "--setting", "wiqa-demo", "--split", "dev", "--json")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["accuracy"] == report["accuracy"] and "by_question_type" in report
    assert report["accuracy"] == round(
        100 * sum(labels[e.qid].replace(" ", "_") == e.answers[0] for e in wiqa) / len(wiqa), 2
    )
    with pytest.raises(ifqa.IfqaError, match="label"):
        ifqa.evaluate_predictions({wiqa[0].qid: "maybe"}, wiqa)
    same = ifqa.evaluate_predictions(labels, wiqa, compare=labels)
    assert same["compare"]["accuracy"] == report["accuracy"]


def test_every_public_name_and_method_explains_itself():
    """``help(ifqa.X)`` says what X is and what each public method does (walked over ``ifqa.__all__``,
    so a name added later is covered); ``help(ifqa.Pipeline)`` lists the settings it takes."""
    import inspect

    missing = []
    for name in ifqa.__all__:
        obj = getattr(ifqa, name)
        if not callable(obj) or not (inspect.isclass(obj) or inspect.isfunction(obj)):
            continue
        if not (obj.__doc__ or "").strip():
            missing.append(name)
        if inspect.isclass(obj):
            for attribute, member in vars(obj).items():
                function = member.fget if isinstance(member, property) else member
                if attribute.startswith("_") or not callable(function):
                    continue
                if not (getattr(function, "__doc__", None) or "").strip():
                    missing.append(f"{name}.{attribute}")
    assert not missing, f"public names without a docstring: {missing}"
    from dataclasses import fields

    from ifqa.retrieval.config import RetrievalConfig

    assert all(f"    {f.name} = " in ifqa.Pipeline.__doc__ for f in fields(RetrievalConfig))


def test_objects_print_as_what_they_hold():
    """A notebook cell showing an object shows its name, size and settings, not 19,000 characters."""
    questions = ifqa.load_questions("demo", "dev")
    assert repr(questions) == "QuestionSet('demo:dev', 24 questions, task='qa')"
    assert repr(ifqa.open_index("demo:bm25")) == "Searcher('bm25:demo-bm25', bm25s, 4,151 passages)"
    assert repr(ifqa.Pipeline(k=5, query_mode="clean")) == "Pipeline(k=5, query_mode='clean')"
    assert repr(ifqa.Pipeline()) == "Pipeline(the defaults of ifqa retrieve)"


def test_evaluate_predictions_refuses_a_file_made_for_another_question_set(tmp_path):
    """As `ifqa evaluate` does: the file's manifest records the set it was made for (trust round 6)."""
    import json

    from ifqa import evaluate_predictions, load_questions, read
    from ifqa.errors import IfqaError

    path = tmp_path / "train-preds.jsonl"
    read("majority", load_questions("demo", "train"), output=path)
    assert json.loads((tmp_path / "train-preds.jsonl.manifest.json").read_text())["questions"]["name"] == "demo:train"
    with pytest.raises(IfqaError, match="made for the question set 'demo:train'"):
        evaluate_predictions(path, load_questions("demo", "dev"))
