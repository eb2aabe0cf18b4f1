"""The API's one validation layer (issue #36): every public function and method checks its
arguments at the boundary. The walk finds every public callable of ``ifqa`` and needs it checked;
each is then called, from one valid call, with every wrong value its checks stand for, and must
raise ``TypeError``/``ValueError``/``IfqaError`` naming the argument, never an internal error and
never a silent answer."""

from __future__ import annotations

import inspect
import json

import numpy as np
import pytest

import ifqa
from ifqa import arguments as arg
from ifqa.artifacts import Example
from ifqa.errors import IfqaError
from ifqa.retrieval.hits import Hit

#: What each check stands for: values it must refuse.
WRONG = {
    arg.count: [0, -3, "5", 2.5, True, None],
    arg.text: [None, 3, b"bytes", "  ", "a lone surrogate \udcff"],
    arg.texts: ["one string", None, 3, [3], ["ok", None]],
    arg.path_like: [None, 3, b"bytes", " "],
    arg.device: [3, "gpu"] + ([] if __import__("torch").cuda.is_available() else ["cuda"]),
    arg.questions: [
        None,
        ["a question as a string"],
        3,
        "no-such-questions.json",
        [Example("1", "If a?", ["x"]), Example("1", "If b?", ["y"])],  # one id twice
    ],
    arg.records: [3, {"qid": "1"}, [1, 2], b"x", [{"qid": "1"}, {"qid": "1"}]],
    arg.answers: [None, 3, [3], b"x", [], ["\udcff"]],
    arg.prediction: [None, 3, ["list"], "\udcff"],
    arg.position: ["3", 2.5, True, None],
    arg.flag: ["no", 1, None],
    arg.shareable: [3, {"qid": "1"}, [1, 2], b"x", [{"qid": "1"}, {"qid": "1"}], "no-such-run.jsonl"],
}
#: Public names that are data, not functions: their fields are typed.
DATA = {"Hit", "Example", "QuestionSet", "RunRecord", "RetrievalConfig", "IfqaError", "__version__"}


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    folder = tmp_path_factory.mktemp("api")
    control = folder / "control"
    control.mkdir()
    from ifqa.retrieval import control as agnostic

    np.save(control / agnostic.WEIGHTS, np.zeros(agnostic.N_FEATURES))
    (control / agnostic.SETTINGS).write_text(
        json.dumps({"n_features": agnostic.N_FEATURES, "intercept": 0.0, "weight": 0.5})
    )
    dev = ifqa.load_questions("demo", "dev")
    searcher = ifqa.open_index("demo:bm25")
    run = ifqa.Pipeline(indexes=["demo:bm25"], k=5).run(dev)
    run_file = folder / "run.jsonl"
    ifqa.Pipeline(indexes=["demo:bm25"], k=5).run_to_file(dev, run_file)
    ifqa.read("majority", dev, output=folder / "majority.jsonl")
    (folder / "twin.jsonl").write_text("".join(json.dumps({"qid": e.qid, "prediction": "x"}) + "\n" for e in dev))
    return {
        "folder": folder,
        "run_file": run_file,
        "dev": dev,
        "searcher": searcher,
        "hits": searcher.search(dev[0].question, k=3),
        "run": run,
        "reranker": ifqa.Reranker(control, depth=3),
        "pipeline": ifqa.Pipeline(indexes=["demo:bm25"], k=5),
        "experiment": ifqa.Experiment(ifqa.__file__.replace("__init__.py", "../experiments/demo.yaml")),
        "out": folder / "out.jsonl",
    }


def _valid_calls(w):
    """One valid call per public callable: ``(name, function, kwargs)``."""
    q = w["dev"][0].question
    return [
        ("load_questions", ifqa.load_questions, {"setting": "demo", "split": "dev", "path": None, "data_dir": None}),
        ("open_index", ifqa.open_index, {"index": "demo:bm25", "corpus": None, "device": None}),
        ("Searcher", ifqa.Searcher, {"index": "demo:bm25", "corpus": None, "device": None}),
        ("Searcher.search", w["searcher"].search, {"question": q, "k": 3}),
        ("Searcher.batch_search", w["searcher"].batch_search, {"questions": [q], "k": 3, "threads": 1}),
        ("Searcher.passage", w["searcher"].passage, {"position": 0}),
        ("Pipeline.search", w["pipeline"].search, {"question": q, "k": 3}),
        ("Pipeline.batch_search", w["pipeline"].batch_search, {"questions": [q], "k": 3, "subqueries": [[q]]}),
        ("Pipeline.run", w["pipeline"].run, {"questions": w["dev"]}),
        ("Pipeline.run_to_file", w["pipeline"].run_to_file, {"questions": w["dev"], "output": w["out"], "progress": False}),
        ("Reranker.rerank", w["reranker"].rerank, {"question": q, "hits": w["hits"]}),
        ("Reranker.rerank_many", w["reranker"].rerank_many, {"questions": [q], "hits_lists": [w["hits"]], "progress": True}),
        ("Reranker.rerank_run", w["reranker"].rerank_run, {"run": w["run_file"], "output": w["out"].with_name("reranked.jsonl"), "questions": w["dev"], "progress": False}),
        ("Reranker.describe", w["reranker"].describe, {}),
        ("read", ifqa.read, {"reader": "majority", "questions": w["dev"], "run": None, "output": None, "progress": False, "api_key": None}),
        ("evaluate_run", ifqa.evaluate_run, {"run": w["run"], "questions": w["dev"], "compare": w["run"]}),
        ("evaluate_predictions", ifqa.evaluate_predictions, {"predictions": {e.qid: "x" for e in w["dev"]}, "questions": w["dev"], "compare": None}),
        ("analyze_premise", ifqa.analyze_premise, {"predictions": w["folder"] / "majority.jsonl", "questions": w["dev"], "output": w["folder"] / "premise", "twins": "rule", "twin_predictions": w["folder"] / "twin.jsonl", "api_key": None, "progress": False}),
        ("to_dataset", ifqa.to_dataset, {"data": w["run_file"]}),
        ("exact_match", ifqa.exact_match, {"prediction": "x", "answers": ["x"]}),
        ("f1", ifqa.f1, {"prediction": "x", "answers": ["x"]}),
        ("Experiment.stages", w["experiment"].stages, {"kind": "retrieve"}),
        ("Experiment.run_file", w["experiment"].run_file, {"stage": "bm25"}),
        ("Experiment.predictions_file", w["experiment"].predictions_file, {"stage": "closed-book"}),
        ("Experiment.index", w["experiment"].index, {"spec": "demo:bm25"}),
    ]  # fmt: skip


def _public_callables():
    """Every public function, class constructor and public method reachable from ``ifqa``."""
    for name in ifqa.__all__:
        if name in DATA:
            continue
        obj = getattr(ifqa, name)
        if inspect.isclass(obj):
            yield name, obj.__init__
            seen = set()
            for cls in obj.__mro__:  # inherited methods are public too
                for attr, member in vars(cls).items():
                    if callable(member) and not attr.startswith("_") and attr not in seen:
                        seen.add(attr)
                        yield f"{name}.{attr}", member
        else:
            yield name, obj


def _checks(function):
    """``{parameter: (base check, whether None is allowed)}`` as the layer declares them."""
    checks = getattr(function.__init__ if inspect.isclass(function) else function, "__checked__", {})
    return {name: (getattr(check, "inner", check), hasattr(check, "inner")) for name, check in checks.items()}


def test_every_public_callable_with_arguments_is_checked():
    unchecked = []
    for name, function in _public_callables():
        parameters = [p for p in inspect.signature(function).parameters if p not in ("self", "fields", "options")]
        if parameters and not getattr(function, "__checked__", None):
            unchecked.append(name)
    assert not unchecked, f"public callables whose arguments nothing checks: {unchecked}"


def test_every_checked_callable_has_a_valid_call(world):
    called = {name for name, *_ in _valid_calls(world)}
    public = {
        name.removesuffix(".__init__")
        for name, function in _public_callables()
        if getattr(function, "__checked__", None)
    }
    # constructors are called by the fixture; running an experiment is the experiments' tests' job
    assert public - called <= {"Experiment", "run_experiment", "Reranker", "Experiment.run", "Pipeline"}


def _cases(world):
    for name, function, kwargs in _valid_calls(world):
        for parameter, (check, none_allowed) in _checks(function).items():
            for wrong in WRONG.get(check, []):
                if wrong is None and none_allowed:
                    continue
                yield name, function, {**kwargs, parameter: wrong}, parameter


def test_each_valid_call_succeeds(world):
    for _name, function, kwargs in _valid_calls(world):
        function(**kwargs)


def test_wrong_arguments_are_refused_naming_the_argument(world):
    failures, tried = [], 0
    for name, function, kwargs, parameter in _cases(world):
        tried += 1
        try:
            function(**kwargs)
        except (TypeError, ValueError, IfqaError) as exc:
            if parameter not in str(exc):
                failures.append(f"{name}({parameter}={kwargs[parameter]!r}): message does not name it: {exc}")
        except Exception as exc:  # noqa: BLE001 - any other error is the failure being tested for
            failures.append(f"{name}({parameter}={kwargs[parameter]!r}): {type(exc).__name__}: {exc}")
        else:
            failures.append(f"{name}({parameter}={kwargs[parameter]!r}): accepted")
    assert tried > 100 and not failures, "\n".join(failures)


@pytest.mark.parametrize(
    "call, problem",
    [
        (lambda w: w["searcher"].passage(10**7), "outside the collection"),
        (lambda w: ifqa.Pipeline("bm25"), "config must be RetrievalConfig"),
        (lambda w: w["reranker"].rerank_many(["a", "b"], [w["hits"]]), "2 questions but 1 hit lists"),
        (lambda w: w["reranker"].rerank("a", ["passage text"]), "hits[0] must be a Hit"),
        (lambda w: w["pipeline"].batch_search(["a", "b"], subqueries=[["a"]]), "2 questions but 1 subquery lists"),
        (
            lambda w: w["reranker"].rerank_run(
                w["run_file"], w["out"].with_name("r2.jsonl"), ifqa.load_questions("demo", "train")
            ),
            "made for the question set 'demo:dev'",
        ),
        (lambda w: ifqa.evaluate_run([], w["dev"]), "run holds no records"),
        (lambda w: ifqa.evaluate_run(w["run"], ifqa.load_questions("demo", "train")), "not in demo:train"),
        (lambda w: ifqa.evaluate_run(w["run"], w["dev"], compare=w["run"][:3]), "compare holds 3 of the run's 24"),
        (lambda w: ifqa.evaluate_predictions({"x": "y"}, w["dev"]), "answer none of the 24 questions"),
        (lambda w: ifqa.evaluate_predictions({}, w["dev"]), "predictions hold no answers"),
        (
            lambda w: ifqa.evaluate_predictions({e.qid: "x" for e in w["dev"]}, w["dev"], {w["dev"][0].qid: "x"}),
            "compare answers 1 of the 24",
        ),
        (lambda w: w["experiment"].run_file("unknown"), "no retrieve stage named 'unknown'"),
        (lambda w: ifqa.open_index("demo:bm25").search("q", k=0), "k must be at least 1"),
        (
            lambda w: w["reranker"].rerank("a", [Hit("p1", "T", None, 1.0, 1)]),  # type: ignore[arg-type]
            "hits[0].text must be a str",
        ),
        (  # records of another set whose qids collide, with no manifest: their question text tells
            lambda w: ifqa.evaluate_run(
                [{**r, "question": "If the moon were cheese?"} if i == 2 else r for i, r in enumerate(w["run"])],
                w["dev"],
            ),
            "asks 'If the moon were cheese?'",
        ),
        (lambda w: ifqa.exact_match("Paris", []), "answers is empty"),
    ],
)
def test_wrong_calls_the_checks_cannot_see_alone(world, call, problem):
    with pytest.raises((TypeError, ValueError, IfqaError)) as error:
        call(world)
    assert problem in str(error.value)


def test_what_is_accepted_means_what_it_says(world, tmp_path):
    assert ifqa.exact_match("Hudson", "Hudson") == 1.0 == ifqa.exact_match("Hudson", ["Hudson"])  # one answer
    assert ifqa.f1("Hudson River", "Hudson") == ifqa.f1("Hudson River", ["Hudson"])
    path = tmp_path / "q.json"
    path.write_text(json.dumps([{"idx": 7, "question": "If rivers ran uphill, what then?", "answers": ["x"]}]))
    assert len(world["pipeline"].run(path)) == 1  # a questions file's path is loaded
    assert world["pipeline"].search(world["dev"][0].question, k=2)[1].rank == 2  # k=2 is 2, not the default
