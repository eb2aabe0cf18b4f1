"""The architecture's promises: registries take a new engine or dataset as one module plus one
line, and packages do not import each other in a cycle (module size is a guide in
docs/ARCHITECTURE.md, not a test: modules are cut by job)."""

import ast
import json
from pathlib import Path

import pytest

from ifqa.api import Pipeline
from ifqa.artifacts import Example, QuestionSet
from ifqa.datasets import QuestionSource
from ifqa.registry import DATASETS, ENGINES
from ifqa.retrieval.specs import open_index

PACKAGE = Path(__file__).resolve().parents[1] / "ifqa"


def test_a_toy_dataset_is_one_module_and_one_registry_line(monkeypatch, cli, tmp_path):
    monkeypatch.setattr(DATASETS, "_entries", {**DATASETS._entries, "toy": "tests.toys.toy_dataset:TOY"})
    monkeypatch.setattr(DATASETS, "_loaded", dict(DATASETS._loaded))
    questions = QuestionSource("toy").load()
    assert questions.name == "toy:dev" and [e.qid for e in questions] == ["t1", "t2"]
    assert QuestionSource("toy", "train").load().examples[0].answers == ["Lyon"]


TOY_PASSAGES = [
    ("Paris", "Paris is the capital of France."),
    ("Lyon", "Lyon is on the Rhone."),
    ("Rhone", "The Rhone flows south."),
]


@pytest.fixture
def toy_engine(monkeypatch, tmp_path):
    """tests/toys/toy_engine.py registered by one line, and a collection of three passages."""
    monkeypatch.setattr(ENGINES, "_entries", {**ENGINES._entries, "toy": "tests.toys.toy_engine:ToyRetriever"})
    monkeypatch.setattr(ENGINES, "_loaded", dict(ENGINES._loaded))
    corpus = tmp_path / "passages.jsonl"
    corpus.write_text(
        "".join(json.dumps({"id": f"p{i}", "title": t, "text": x}) + "\n" for i, (t, x) in enumerate(TOY_PASSAGES))
    )
    return corpus


def test_a_toy_engine_is_built_and_searched_by_every_command_with_no_other_change(
    toy_engine, cli, tmp_path, monkeypatch
):
    folder = tmp_path / "toy-index"
    built = cli("index", "toy", "--corpus", toy_engine, "-o", folder, "--min-shared", "3", "--no-progress")
    assert built.returncode == 0, built.stderr
    manifest = json.loads((folder / "manifest.json").read_text())
    assert manifest["engine"] == "toy" and manifest["params"] == {"lowercase": True, "min_shared": 3}
    assert "toy" in cli("index", "--help").stdout
    refused = cli("index", "toy", "--corpus", toy_engine, "-o", tmp_path / "bad", "--min-shared", "0")
    assert refused.returncode != 0 and "--min-shared must be at least 1" in refused.stderr
    assert not (tmp_path / "bad").exists()
    clobber = cli("index", "toy", "--corpus", toy_engine, "-o", tmp_path, "--force")  # the output guard covers it
    assert clobber.returncode == 1 and "--corpus" in clobber.stderr and toy_engine.read_text().count("\n") == 3

    questions = tmp_path / "q.json"
    questions.write_text(json.dumps([{"idx": 1, "question": "Does the Rhone flow south?", "answers": ["south"]}]))
    run = tmp_path / "run.jsonl"
    retrieved = cli("retrieve", "--index", folder, "--questions", questions, "--k", "2", "-o", run)
    assert retrieved.returncode == 0, retrieved.stderr
    [record] = [json.loads(line) for line in run.read_text().splitlines()]
    assert [c["id"] for c in record["ctxs"]] == ["p2"]  # settings read back: two shared words are not enough

    (tmp_path / "exp.yaml").write_text(
        "name: toy\nquestions: {file: q.json}\noutput: out\nk: 2\nstages:\n"
        "  - {stage: collection, name: c, inputs: [passages.jsonl]}\n"
        "  - {stage: index, name: i, collection: c, engine: toy, lowercase: false}\n"
        "  - {stage: retrieve, name: r, indexes: [i]}\n"
    )
    ran = cli("experiment", "run", tmp_path / "exp.yaml", "--no-progress")
    assert ran.returncode == 0, ran.stderr
    staged = json.loads((tmp_path / "out" / "indexes" / "i" / "manifest.json").read_text())
    assert staged["engine"] == "toy" and staged["params"] == {"lowercase": False, "min_shared": 1}
    wrong = tmp_path / "wrong.yaml"
    wrong.write_text((tmp_path / "exp.yaml").read_text().replace("lowercase: false", "encoder: x"))
    refused = cli("experiment", "run", wrong, "--no-progress")
    assert refused.returncode != 0 and "unknown key(s) encoder" in refused.stderr

    import ifqa.serve.app

    services = []
    monkeypatch.setattr(ifqa.serve.app, "create_app", lambda service: services.append(service))
    monkeypatch.setattr("uvicorn.run", lambda app, **options: None)
    served = cli("serve", "--index", folder)
    assert served.returncode == 0, served.stderr
    result = services[0].search("Does the Rhone flow south?", k=2)
    assert [p["id"] for p in result["passages"]] == ["p2"] and services[0].health()["indexes"][0]["engine"] == "toy"


def test_a_toy_engine_opens_through_the_api(toy_engine, tmp_path):
    from tests.toys.toy_engine import ToyRetriever, ToySettings

    folder = tmp_path / "toy-index"
    ToyRetriever.build(toy_engine, folder, ToySettings(), progress=False)
    retriever = open_index(folder)
    questions = QuestionSet("toy", [Example("1", "Where is the Rhone?", ["Lyon"], ["Lyon is on the Rhone."])])
    pipeline = Pipeline(indexes=[str(folder)], k=1, searchers=[retriever])
    [record] = pipeline.run(questions)
    assert record["ctxs"][0]["id"] == "p1" and record["ctxs"][0]["gold"] and record["ctxs"][0]["has_answer"]


def _imports(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("ifqa"):
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith("ifqa"))
    return found


def _unit(module: str) -> str:
    """The package (or top-level module) a module belongs to: ifqa.retrieval.bm25 -> ifqa.retrieval."""
    parts = module.split(".")
    candidate = PACKAGE.parent.joinpath(*parts[:2])
    return ".".join(parts[:2]) if candidate.is_dir() or candidate.with_suffix(".py").exists() else "ifqa"


def test_no_import_cycle_between_packages():
    graph: dict[str, set[str]] = {}
    for path in PACKAGE.rglob("*.py"):
        module = ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        source = _unit(module)
        for target in map(_unit, _imports(path)):
            if target != source and target != "ifqa":
                graph.setdefault(source, set()).add(target)
    assert "ifqa.retrieval" in graph["ifqa.experiments"]  # the graph is real
    state: dict[str, int] = {}

    def visit(node, trail):
        state[node] = 1
        for target in graph.get(node, ()):
            if state.get(target) == 1:
                pytest.fail("import cycle: " + " -> ".join(trail + [node, target]))
            if not state.get(target):
                visit(target, trail + [node])
        state[node] = 2

    for node in list(graph):
        if not state.get(node):
            visit(node, [])


def _module_graph() -> dict[str, set[str]]:
    """Which ifqa module imports which (a name imported from a package resolves to its submodule when
    there is one, else to the package's ``__init__``), lazy imports inside functions included."""
    modules = {
        ".".join(p.relative_to(PACKAGE.parent).with_suffix("").parts).removesuffix(".__init__"): p
        for p in PACKAGE.rglob("*.py")
    }

    def resolve(name: str) -> str:
        while name not in modules and "." in name:
            name = name.rsplit(".", 1)[0]
        return name

    graph: dict[str, set[str]] = {}
    for module, path in modules.items():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("ifqa"):
                targets = {resolve(f"{node.module}.{alias.name}") for alias in node.names}
            elif isinstance(node, ast.Import):
                targets = {resolve(alias.name) for alias in node.names if alias.name.startswith("ifqa")}
            else:
                continue
            graph.setdefault(module, set()).update(t for t in targets if t in modules and t != module)
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The graph's strongly connected components of more than one node (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for target in graph.get(node, ()):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in list(graph):
        if node not in index:
            visit(node)
    return found


def test_no_import_cycle_between_modules():
    """Within a package too: a module never imports, even lazily, a module that imports it back."""
    graph = _module_graph()
    assert "ifqa.retrieval.reordering" in graph["ifqa.retrieval.rerank"]  # the graph is real
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]  # and so is the check
    assert _cycles(graph) == []


def test_every_package_is_installed():
    import tomllib

    declared = set(tomllib.loads((PACKAGE.parent / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    found = {".".join(p.parent.relative_to(PACKAGE.parent).parts) for p in PACKAGE.rglob("__init__.py")}
    assert found <= declared


def test_the_gpu_extra_installs_faiss_gpu_in_place_of_faiss_cpu():
    """`ifqa[gpu]` (GPU machines, instead of [all]): faiss-gpu and vLLM where they install (Linux x86-64),
    never faiss-cpu beside faiss-gpu (both install the `faiss` module)."""
    import tomllib

    from packaging.requirements import Requirement

    extras = tomllib.loads((PACKAGE.parent / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    gpu = [Requirement(r) for r in extras["gpu"]]
    names = {r.name for r in gpu}
    assert {"faiss-gpu", "vllm"} <= names and "faiss-cpu" not in names
    assert all("dense" not in r.extras and "all" not in r.extras for r in gpu)  # [dense] would bring faiss-cpu
    assert all(r.marker is not None for r in gpu if r.name in ("faiss-gpu", "vllm"))


def test_the_registry_tables_name_every_entry():
    """docs/ARCHITECTURE.md's registry table lists every entry of every registry, by name (a new
    dataset, task, engine, reader or backend is documented where the design is read)."""
    from ifqa import registry

    page = (PACKAGE.parent / "docs" / "ARCHITECTURE.md").read_text()
    rows = {line.split("|")[1].strip().strip("`"): line for line in page.splitlines() if line.startswith("| `")}
    for name in dir(registry):
        entries = getattr(registry, name)
        if not isinstance(entries, registry.Registry):
            continue
        assert name in rows, f"no row for {name}"
        listed = rows[name].split("|")[2]
        missing = [entry for entry in entries.names() if f"`{entry}`" not in listed]
        assert not missing, f"{name}: {missing} not in its row"


def test_every_engine_keeps_the_contract_literally():
    """``build(corpus, folder, settings, *, progress, force, ...)``: three positional arguments, every
    other keyword-only with a default (or the engine's own ``**options``); ``load`` reads its settings back through ``settings_of``."""
    import inspect
    import textwrap

    from ifqa.retrieval.engines import Engine

    contract = inspect.signature(Engine.build)
    for name in ENGINES.names():
        engine = ENGINES.get(name)
        parameters = list(inspect.signature(engine.build).parameters.values())
        positional = [p.name for p in parameters if p.kind is p.POSITIONAL_OR_KEYWORD]
        assert positional == ["corpus", "folder", "settings"], name
        rest = [p for p in parameters if p.kind is not p.POSITIONAL_OR_KEYWORD]
        assert all(p.kind is p.VAR_KEYWORD or (p.kind is p.KEYWORD_ONLY and p.default is not p.empty) for p in rest), (
            name
        )
        assert {p.name: p.default for p in rest if p.name in ("progress", "force")} == {
            "progress": contract.parameters["progress"].default,
            "force": contract.parameters["force"].default,
        }, name
        source = textwrap.dedent(inspect.getsource(engine.load))
        calls = [n for n in ast.walk(ast.parse(source)) if isinstance(n, ast.Call)]
        assert any(getattr(c.func, "id", None) == "settings_of" for c in calls), f"{name}.load skips settings_of"


def test_an_engine_refuses_settings_its_manifest_cannot_hold(tmp_path):
    """What ``settings_of`` checks, every engine's load meets: a manifest whose BM25 k1 is negative."""
    from ifqa.errors import IfqaError
    from ifqa.retrieval import bm25

    corpus = tmp_path / "passages.jsonl"
    corpus.write_text(
        "".join(json.dumps({"id": f"p{i}", "title": t, "text": x}) + "\n" for i, (t, x) in enumerate(TOY_PASSAGES))
    )
    bm25.build(corpus, tmp_path / "idx", progress=False)
    manifest = json.loads((tmp_path / "idx" / "manifest.json").read_text())
    manifest["params"]["k1"] = -1
    with pytest.raises(IfqaError, match="k1"):
        ENGINES.get("bm25s").load(tmp_path / "idx", manifest, corpus)


DOC = Path(__file__).resolve().parents[1] / "docs" / "ARCHITECTURE.md"
IFQA = PACKAGE


def test_the_package_tree_names_every_module_and_only_modules_that_exist():
    import re

    tree = DOC.read_text(encoding="utf-8").split("## Packages")[1].split("```")[1]
    named = {name.split("/")[-1] for name in re.findall(r"([\w/]+\.py)\b", tree)}
    modules = [p for p in IFQA.rglob("*.py") if p.name != "__init__.py" and "demo" not in p.relative_to(IFQA).parts]
    assert sorted(str(p.relative_to(IFQA)) for p in modules if p.name not in named) == []
    assert sorted(named - {p.name for p in modules}) == []


def test_the_backend_capabilities_the_docs_list_are_the_base_classes():
    """The LLM_BACKENDS row names what a backend declares: every public attribute of ``Backend`` beyond
    the three every backend defines, and nothing else."""
    import re

    from ifqa.llm.protocol import Backend

    row = next(line for line in DOC.read_text(encoding="utf-8").splitlines() if line.startswith("| `LLM_BACKENDS`"))
    declared = {name for name in vars(Backend) if not name.startswith("_")} - {"from_options", "complete", "describe"}
    listed = set(re.findall(r"`(\w+)`", row.split("what it can do", 1)[1].split("(tests/", 1)[0]))
    assert listed == declared - {"name"}


def test_every_function_local_ifqa_import_says_why_and_is_not_at_the_top_too():
    """An import inside a function is a per-feature one with its reason beside it (same line or the one
    above), and never imports from a module the module imports from at its top (whatever the names)."""
    problems = []
    for path in sorted(IFQA.rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        lines, tree = text.splitlines(), ast.parse(text)
        top = {n.module for n in tree.body if isinstance(n, ast.ImportFrom)}  # a module, whichever names
        for function in ast.walk(tree):
            if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for node in ast.walk(function):
                if not (isinstance(node, ast.ImportFrom) and (node.module or "").startswith("ifqa")):
                    continue
                where = f"{path.relative_to(IFQA.parent)}:{node.lineno}"
                said = "#" in lines[node.lineno - 1] or "#" in lines[node.end_lineno - 1]
                if not said and not lines[node.lineno - 2].strip().startswith("#"):
                    problems.append(f"{where}: no reason given")
                if node.module in top:  # its other names belong at the top beside the ones there
                    problems.append(f"{where}: {node.module} is imported at the top already")
    assert problems == []


def test_no_docstring_holds_a_lone_surrogate():
    """Python 3.13 dedents docstrings when it compiles them, through UTF-8: a docstring holding a lone
    surrogate (``"\\ud800"`` written unescaped) fails the import of its module there, and only there."""
    found = []
    for path in sorted([*IFQA.rglob("*.py"), *IFQA.parent.joinpath("tests").rglob("*.py")]):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                doc = ast.get_docstring(node, clean=False) or ""
                if any("\ud800" <= c <= "\udfff" for c in doc):
                    found.append(f"{path.relative_to(IFQA.parent)}:{getattr(node, 'lineno', 1)}")
    assert found == []


def test_every_sqlite_connection_serves_any_thread():
    """``ifqa serve`` answers each request on a thread of a pool: a connection ifqa keeps (the response
    cache, the token cache) is made on one thread and used on others, so each opts out of sqlite3's
    same-thread check (and its owner serializes the calls). Walks every ``sqlite3.connect`` in ifqa/."""
    found, problems = 0, []
    for path in sorted(IFQA.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and ast.unparse(node.func) == "sqlite3.connect":
                found += 1
                shared = any(k.arg == "check_same_thread" and ast.unparse(k.value) == "False" for k in node.keywords)
                if not shared:
                    problems.append(f"{path.relative_to(IFQA.parent)}:{node.lineno}")
    assert found >= 2 and problems == []


def test_a_toy_trainable_kind_is_one_module_and_one_registry_line(monkeypatch, cli, tmp_path):
    """A kind trained on the shared loop is one module of at most 60 lines (tests/toys/toy_trainer.py) and one
    registry line: ``ifqa train toy`` and an experiment's train stage of kind toy follow from the entry alone."""
    from pathlib import Path

    from ifqa.registry import TRAINABLE

    assert len((Path(__file__).parent / "toys" / "toy_trainer.py").read_text().splitlines()) <= 60
    monkeypatch.setattr(TRAINABLE, "_entries", {**TRAINABLE._entries, "toy": "tests.toys.toy_trainer:TOY"})
    run = tmp_path / "run.jsonl"
    run.write_text(
        "".join(
            json.dumps({"qid": str(i), "question": f"q{i}", "answers": [a], "ctxs": []}) + "\n"
            for i, a in enumerate(["Lyon", "Paris", "Lyon"])
        )
    )
    trained = cli("train", "toy", "--run", run, "-o", tmp_path / "toy", "--shout")
    assert trained.returncode == 0, trained.stderr
    assert "step 8" in trained.stdout and (tmp_path / "toy" / "best" / "answer.txt").read_text() == "LYON"
    assert cli("train", "toy", "--run", run, "-o", tmp_path / "toy", "--shout").returncode == 0  # finished: no work
    listed = cli("train", "--help")
    assert listed.returncode == 0 and "toy" in listed.stdout

    (tmp_path / "exp.yaml").write_text(
        "name: toy\nquestions: {setting: demo, split: dev}\noutput: out\nk: 2\n"
        "retrievers:\n  - {name: bm25, indexes: ['demo:bm25']}\n"
        "trainers:\n  - {name: learned, kind: toy, retriever: bm25, recipe: {shout: true}}\n"
    )
    env = {**__import__("os").environ, "IFQA_CACHE_DIR": str(tmp_path / "cache")}
    ran = cli("experiment", "run", tmp_path / "exp.yaml", "--no-progress", env=env)
    assert ran.returncode == 0, ran.stderr
    learned = tmp_path / "out" / "models" / "learned"
    train_run = [json.loads(line) for line in (learned / "train_run.jsonl").read_text().splitlines()]
    assert len(train_run) == 12 and all(len(r["ctxs"]) == 2 for r in train_run)  # the demo train split, k 2
    assert (learned / "best" / "answer.txt").read_text().isupper()
    wrong = tmp_path / "wrong.yaml"
    wrong.write_text((tmp_path / "exp.yaml").read_text().replace("shout: true", "whisper: true"))
    refused = cli("experiment", "run", wrong, "--no-progress", env=env)
    assert refused.returncode != 0 and "whisper" in refused.stderr


def test_a_kind_declared_without_a_part_is_refused_when_the_registry_loads_it(monkeypatch, cli):
    """A trainable kind whose declaration lacks a part (here ``train``, ``summary``): one line naming it."""
    from ifqa.errors import IfqaError
    from ifqa.registry import TRAINABLE

    monkeypatch.setattr(TRAINABLE, "_entries", {**TRAINABLE._entries, "half": "tests.toys.toy_dataset:TOY"})
    monkeypatch.setattr(TRAINABLE, "_loaded", dict(TRAINABLE._loaded))
    with pytest.raises(IfqaError, match="trainable kind 'half': its declaration has no recipe, inputs, artifact"):
        TRAINABLE.get("half")


def test_every_kinds_help_is_its_recipes_first_paragraph_and_a_recipe_without_one_is_refused():
    """A kind's command help is said once, in its recipe's docstring; a recipe with none (dataclass then writes
    its signature there) makes the declaration fail, which the registry reports in one line."""
    import dataclasses

    from ifqa.registry import TRAINABLE
    from ifqa.training.kinds import RunKind

    for name in TRAINABLE:
        kind = TRAINABLE.get(name)
        assert kind.help and kind.help == " ".join(kind.recipe.__doc__.split("\n\n")[0].split()), name

    @dataclasses.dataclass(frozen=True)
    class Bare:
        steps: int = 1

    with pytest.raises(TypeError, match="Bare has no docstring"):
        RunKind(recipe=Bare, reader="tests.toys.toy_trainer:READER")


def test_index_specs_are_parsed_in_one_place():
    """ARCHITECTURE.md: ``registry.split_spec`` alone tells a ``SCHEME:NAME`` spec from a folder."""
    found = [
        f"{path.relative_to(PACKAGE)}:{number}"
        for path in sorted(PACKAGE.rglob("*.py"))
        if path.name != "registry.py"
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if "in INDEX_SCHEMES" in line
    ]
    assert found == []


def test_every_reader_entry_declares_the_reader_interface_and_is_never_probed():
    """readers/__init__.py's ``ReaderEntry`` is the interface: every READERS entry subclasses it, its
    docstring names exactly what it declares, and no module asks an entry with ``getattr``."""
    import re

    import ifqa.readers
    from ifqa.readers import ReaderEntry
    from ifqa.registry import READERS

    assert all(isinstance(READERS.get(name), ReaderEntry) for name in READERS)
    declared = {n for n in [*vars(ReaderEntry), *ReaderEntry.__annotations__] if not n.startswith("_")}
    named = set(re.findall(r"``(\w+)[`(]", ifqa.readers.__doc__.split("A reader entry", 1)[1]))
    assert named - {"ReaderEntry", "ifqa", "configs", "iterative"} == declared
    probes = []
    for path in sorted(PACKAGE.rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        if "READERS" not in text:  # the modules that hold reader entries
            continue
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.Call) and getattr(node.func, "id", "") in ("getattr", "hasattr") and node.args:
                if "entry" in ast.unparse(node.args[0]) or "READERS" in ast.unparse(node.args[0]):
                    probes.append(f"{path.relative_to(PACKAGE)}:{node.lineno}")
    assert probes == []


def test_a_device_is_picked_in_one_room_and_moves_the_model_in_another():
    """The walk of ``--device`` through ``ifqa train fid`` (benchmarks/device_walk.py), past the option checks
    every value passes: the command, ``devices.py`` (where it is picked, a launched rank's too) and the loop
    (where the run's precision and compiling are decided and the model moves to it); the kind's module sees
    none of it. A new hand-off (a second place that resolves a device, a recipe that reads one) adds a room
    and fails here."""
    import subprocess
    import sys

    script = PACKAGE.parent / "benchmarks" / "device_walk.py"
    result = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    rooms = next(line for line in result.stdout.splitlines() if line.startswith("rooms: "))
    crossed = {room for room in rooms.removeprefix("rooms: ").split(", ") if not room.endswith("(generic)")}
    assert crossed == {"cli/train.py", "devices.py", "training/loop.py"}, result.stdout
