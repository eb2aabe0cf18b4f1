"""The README is a front page and docs/ the reference: links resolve, and every example (console,
shell or Python) either runs on the demo set here, names the test that runs it, or names what it
needs and how to get it (so the docs cannot drift from the code, and a newcomer knows which
examples to expect to work)."""

import json
import re
import shlex
from pathlib import Path

import pytest

from tests.conftest import run_cli

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
MARK = "<!-- runs on the demo set"
#: An example block (indented inside a list item or not) and the comment line above it, if any.
FENCE = re.compile(
    r"^(?:[ \t]*<!--(?P<marker>[^\n]*)-->\n)?[ \t]*```(?P<lang>console|bash|sh|shell|python)\n(?P<body>.*?)```",
    re.S | re.M,
)


def blocks() -> list[tuple[str, str, str, str]]:
    """``(page, marker, language, body)`` of every example block that holds something to run."""
    found = []
    for page in PAGES:
        for match in FENCE.finditer(page.read_text(encoding="utf-8")):
            body = match["body"]
            if match["lang"] == "console" and not any(line.strip().startswith("$ ") for line in body.splitlines()):
                continue  # output only
            found.append((page.name, (match["marker"] or "").strip(), match["lang"], body))
    return found


def _runs_here(marker: str) -> bool:
    return marker.startswith("runs on the demo set (")


def marked_commands() -> list[tuple[str, str]]:
    return [(page, command) for page, command, _ in shown_outputs()]


def shown_outputs() -> list[tuple[str, str, list[str]]]:
    """``(page, command, the output shown under it)`` of every command that runs here, in order."""
    found = []
    for page, marker, lang, body in blocks():
        if lang != "console" or not _runs_here(marker):
            continue
        for line in body.splitlines():
            if line.strip().startswith("$ "):
                found.append((page, line.strip()[2:], []))
            elif found:
                found[-1][2].append(line)
    return found


def _as_compared(lines: list[str]) -> list[str]:
    """Output lines as a page shows them: trailing blanks dropped, durations (``0.81 s``) any duration."""
    lines = [re.sub(r"\b\d+(?:\.\d+)? s\b", "N s", line.rstrip()) for line in lines]
    while lines and not lines[-1]:
        lines.pop()
    return lines


def check_shown_output(page: str, command: str, shown: list[str], printed: str) -> None:
    """What a page shows under a command is what it prints (all of it, or up to a closing ``...``)."""
    if not shown:
        return
    want, got = _as_compared(shown), _as_compared(printed.splitlines())
    if want and want[-1].strip() == "...":
        want, got = want[:-1], got[: len(want) - 1]
    same = len(got) == len(want) and all(_same_line(a, b) for a, b in zip(got, want))
    assert same, f"{page}: what `{command}` prints has drifted from the page:\n" + "\n".join(got)


_NUMBER = re.compile(r"-?\d+\.\d+")


def _same_line(printed: str, shown: str) -> bool:
    """Equal text, decimals allowed one unit apart in their last digit: a float32 sum may round either way
    on another instruction set (AVX2, AVX-512), which a page printed once cannot follow."""
    if _NUMBER.sub("#", printed) != _NUMBER.sub("#", shown):
        return False
    pairs = zip(_NUMBER.findall(printed), _NUMBER.findall(shown))
    return all(len(a) == len(b) and abs(float(a) - float(b)) <= 1.01 * 10 ** -len(a.split(".")[1]) for a, b in pairs)


def test_every_example_runs_names_its_test_or_says_what_it_needs():
    """The marker above each block: ``runs on the demo set (...)`` (run below), ``runs on the demo
    set; tested by tests/FILE::TEST`` (that test exists), ``needs WHAT ...`` (saying how to get it),
    or the README's ``set-up`` (what .ci/run runs)."""
    problems = []
    for page, marker, lang, body in blocks():
        first = body.strip().splitlines()[0][:60]
        if _runs_here(marker):
            continue
        if marker.startswith("runs on the demo set; tested by "):
            test = re.search(r"tests/\S+\.py::\w+", marker)
            path, _, name = test[0].partition("::") if test else ("", "", "")
            if not test or f"def {name}(" not in (ROOT / path).read_text(encoding="utf-8"):
                problems.append(f"{page}: {first}: names no existing test ({marker})")
        elif marker.startswith("needs "):
            if len(marker.split()) < 4:
                problems.append(f"{page}: {first}: say what it needs and how to get it ({marker})")
        elif marker.startswith("set-up") and page == "README.md" and lang == "bash":
            continue
        else:
            problems.append(f"{page}: {first}: no marker (runs on the demo set / tested by / needs)")
    assert not problems, "\n".join(problems)


def test_the_readme_fits_on_a_few_screens():
    assert len((ROOT / "README.md").read_text(encoding="utf-8").splitlines()) <= 250


def test_the_engine_table_is_the_registry():
    """docs/retrieval.md lists every registered engine, the command that builds it and its settings."""
    from ifqa.retrieval.engines import engine_table

    assert engine_table() in (ROOT / "docs" / "retrieval.md").read_text(encoding="utf-8"), engine_table()


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_links_resolve(page):
    for target in re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", page.read_text(encoding="utf-8")):
        if not target.startswith(("http://", "https://", "mailto:")):
            assert (page.parent / target).exists(), f"{page.name}: {target}"


def test_examples_are_marked():
    assert len(marked_commands()) >= 5


def _env(tmp_path, **extra: str) -> dict:
    """A fresh user's environment: the session's, with a cache of the test's own and no hub access."""
    import os

    return {**os.environ, "IFQA_CACHE_DIR": str(tmp_path / "cache"), "HF_HUB_OFFLINE": "1", **extra}


def _run_python(page: str, source: str, cwd, env: dict) -> None:
    """A page's Python example in a fresh interpreter, as a reader pastes it."""
    import subprocess
    import sys

    result = subprocess.run(
        [sys.executable, "-c", source], cwd=cwd, env=env, capture_output=True, text=True, timeout=600
    )
    assert result.returncode == 0, f"{page}:\n{source}\n{result.stderr[-2000:]}"


def test_marked_python_examples_run(tmp_path):
    sources = [(page, body) for page, marker, lang, body in blocks() if lang == "python" and _runs_here(marker)]
    assert sources
    for page, source in sources:
        _run_python(page, source, tmp_path, _env(tmp_path))


#: Examples marked ``needs`` that run here with a stand-in for what they need: the line as the page
#: writes it, and what the test puts in place of the placeholders (``{url}``: a fake OpenAI-compatible
#: endpoint; ``{reranker}``: a tiny reranker trained by the fixture; ``{encoder}``: a tiny encoder, whose
#: int8 export takes seconds where the real model's takes half a minute (the heavy tier exports that one:
#: tests/retrieval/test_exported.py); ``passages.jsonl``: 100 of the demo's passages, the demo size for a
#: command that takes minutes on the whole collection).
STAND_INS = {
    ("retrieval.md", "ifqa index bm25 --corpus passages.jsonl -o indexes/demo-bm25"): {},
    ("README.md", "ifqa index dense --corpus passages.jsonl -o indexes/dense --runtime auto --quantize int8"): {
        "--quantize int8": "--quantize int8 --encoder {encoder}"
    },
    ("README.md", "ifqa read llm --mode cot --demos 4 --model MODEL --base-url URL --run runs/demo-clean.jsonl"): {
        "MODEL": "m",
        "URL": "{url}",
    },
    **{
        ("readers.md", line): {url: "{url}"}
        for line, url in (
            (
                "ifqa read llm --mode qa --demos 0 --model deepseek-ai/DeepSeek-R1-Distill-Qwen-7B --base-url "
                "http://localhost:8000/v1 -o runs/demo-r1.jsonl",
                "http://localhost:8000/v1",
            ),
            (
                "ifqa read llm --mode qa --demos 0 --model qwen3-8b --thinking-budget 2048 --base-url "
                "http://localhost:8080/v1 -o runs/demo-qwen3.jsonl",
                "http://localhost:8080/v1",
            ),
            (
                "ifqa read llm --mode cot --demos 4 --model o4-mini --reasoning-effort low --base-url "
                "https://api.openai.com/v1 -o runs/demo-o4.jsonl",
                "https://api.openai.com/v1",
            ),
        )
    },
    **{
        ("evaluation.md", line): {"MODEL": "judge", "URL": "{url}"}
        for line in (
            "ifqa judge --predictions runs/demo-majority.jsonl --model MODEL --base-url URL -o "
            "runs/demo-majority-judged.jsonl",
            "ifqa evaluate --predictions runs/demo-majority.jsonl --judgments runs/demo-majority-judged.jsonl",
        )
    },
    **{
        ("readers.md", line): {"MODEL": "m", "URL": "{url}"}
        for line in (
            "ifqa read iterative --model MODEL --base-url URL --index demo:bm25 --k 3 --max-steps 5 -o "
            "runs/demo-iterative.jsonl",
            "ifqa read iterative --protocol ircot --model MODEL --base-url URL --index demo:bm25 --k 3",
            "ifqa evaluate --predictions runs/demo-iterative.jsonl",
        )
    },
    **{
        ("evaluation.md", line): {"MODEL": "m", "URL": "{url}"}
        for line in (
            "ifqa read llm --mode qa --demos 0 --model MODEL --base-url URL -o runs/demo-qa.jsonl",
            "ifqa analyze premise --predictions runs/demo-qa.jsonl -o runs/premise-qa",
        )
    },
    ("data.md", 'ifqa retrieve --questions "hf:OWNER/NAME?split=test" --k 20'): {"OWNER/NAME": "someone/cf-set"},
    (
        "data.md",
        'ifqa evaluate --predictions preds.jsonl --questions "hf:/data/my-set?split=dev&fields=question:query,'
        'answers:golden_answers"',
    ): {"/data/my-set": "{flashrag}"},
    (
        "data.md",
        'ifqa index bm25 --corpus "hf:/data/wiki-passages?fields=id:docid,text:contents" -o indexes/wiki-bm25',
    ): {"/data/wiki-passages": "{passages}"},
    ("data.md", 'ifqa index dense --corpus "hf:OWNER/NAME?split=train" -o indexes/wiki-dense'): {
        "OWNER/NAME": "someone/wiki-passages"
    },
    **{
        ("data.md", line): {"MODEL": "m", "URL": "{url}"}
        for line in (
            "ifqa read llm --setting faitheval --mode context --demos 0 --model MODEL --base-url URL -o "
            "runs/faitheval.jsonl",
            "ifqa evaluate --predictions runs/faitheval.jsonl",
            "ifqa analyze premise --predictions runs/faitheval.jsonl -o runs/premise-faitheval",
        )
    },
    (
        "api.md",
        'reranker = ifqa.Reranker("models/reranker/model", depth=100, runtime="openvino")  # a trained reranker',
    ): {
        "models/reranker/model": "{reranker}",
    },
}


def needs_examples() -> list[tuple[str, str, str, list[str]]]:
    """``(page, language, body, lines)`` of every needs-marked block, its lines as ``STAND_INS`` spells them."""
    return [
        (page, lang, body, [line.strip().removeprefix("$ ") for line in body.splitlines()])
        for page, marker, lang, body in blocks()
        if marker.startswith("needs ")
    ]


def stand_in_blocks() -> list[tuple[str, str, str]]:
    """``(page, language, body)`` of every needs-marked block holding a stand-in line, the stand-ins
    made; of a console block only those lines (the others need what its marker says)."""
    found = []
    for page, lang, body, lines in needs_examples():
        chosen = [line for line in lines if (page, line) in STAND_INS]
        if not chosen:
            continue
        if lang == "console":
            body = "\n".join(chosen)
        for line in chosen:
            made = line
            for placeholder, value in STAND_INS[page, line].items():
                made = made.replace(placeholder, value)
            body = body.replace(line, made)
        found.append((page, lang, body))
    return found


def test_every_stand_in_names_a_needs_example_that_exists():
    """Editing an example must not drop it from the run silently."""
    written = {(page, line) for page, _, _, lines in needs_examples() for line in lines}
    assert set(STAND_INS) <= written, set(STAND_INS) - written


@pytest.fixture(scope="module")
def reranker(tmp_path_factory, tiny_model):
    out = tmp_path_factory.mktemp("docs-reranker") / "reranker"
    args = ["--index", "demo:bm25", "--setting", "demo", "--model", tiny_model, "--max-length", "48"]
    result = run_cli("train", "reranker", *args, "--group-size", "4", "--no-progress", "-o", out)
    assert result.returncode == 0, result.stderr
    return out / "model"


def _hub_stand_ins(tmp_path) -> dict:
    """What docs/data.md's Hub lines read: two Hub ids in a ``datasets`` cache (as a download leaves
    them, read with HF_HUB_OFFLINE=1), a FlashRAG-style folder, a passages folder, and preds.jsonl."""
    from ifqa.datasets.demo import corpus_path, load_demo
    from tests.datasets.test_hub import cached_hub_dataset, hub_folder

    dev = load_demo("dev")
    with open(corpus_path(), encoding="utf-8") as whole:
        passages = [json.loads(line) for _, line in zip(range(20), whole)]
    cache = tmp_path / "hf-datasets"
    questions = [{"id": e.qid, "question": e.question, "answers": e.answers} for e in dev]
    cached_hub_dataset(cache, "someone/cf-set", hub_folder(tmp_path / "hub" / "cf-set", {"test": questions}))
    cached_hub_dataset(cache, "someone/wiki-passages", hub_folder(tmp_path / "hub" / "wiki", {"train": passages}))
    flashrag = [{"id": e.qid, "query": e.question, "golden_answers": e.answers} for e in dev]
    renamed = [{"docid": p["id"], "contents": p["text"]} for p in passages]
    (tmp_path / "preds.jsonl").write_text(
        "".join(json.dumps({"qid": e.qid, "prediction": e.answers[0]}) + "\n" for e in dev)
    )
    return {
        "cache": cache,
        "flashrag": hub_folder(tmp_path / "hub" / "my-set", {"dev": flashrag}),
        "passages": hub_folder(tmp_path / "hub" / "wiki-passages", {"train": renamed}),
    }


@pytest.mark.slow
def test_marked_examples_run_in_order(tmp_path, reranker, tiny_model):
    """The examples that run here, in the pages' order, then the needs-marked ones with their
    stand-ins (they read what the earlier ones wrote: runs/demo-clean.jsonl)."""
    from ifqa.datasets.demo import corpus_path, load_demo
    from tests.datasets.test_hub_sets import faitheval_folder
    from tests.readers.fake_openai import FakeOpenAI

    faitheval = faitheval_folder(tmp_path / "FaithEval-counterfactual-v1.0")  # a local copy in its layout
    hub = _hub_stand_ins(tmp_path)
    env = _env(tmp_path, OPENAI_API_KEY="k", IFQA_FAITHEVAL=str(faitheval), HF_DATASETS_CACHE=str(hub["cache"]))
    for page, command, shown in shown_outputs():
        args = shlex.split(command)
        assert args[0] == "ifqa", f"{page}: {command}"
        result = run_cli(*args[1:], cwd=tmp_path, env=env)
        assert result.returncode == 0, f"{page}: {command}\n{result.stderr[-2000:]}"
        check_shown_output(page, command, shown, result.stdout)
    with open(corpus_path(), encoding="utf-8") as whole:
        (tmp_path / "passages.jsonl").write_text("".join(line for _, line in zip(range(100), whole)))
    answers = {e.question: e.answers[0] for e in load_demo("dev") + load_demo("train")}
    with FakeOpenAI(answers) as server:
        for page, lang, body in stand_in_blocks():
            body = body.replace("{url}", server.url).replace("{reranker}", str(reranker))
            body = body.replace("{encoder}", str(tiny_model))
            body = body.replace("{flashrag}", str(hub["flashrag"])).replace("{passages}", str(hub["passages"]))
            if lang == "python":
                _run_python(page, body, tmp_path, env)
                continue
            for command in body.splitlines():
                result = run_cli(*shlex.split(command)[1:], cwd=tmp_path, env=env)
                assert result.returncode == 0, f"{page}: {command}\n{result.stderr[-2000:]}"
    assert (tmp_path / "indexes" / "dense" / "manifest.json").exists()
    assert json.loads((tmp_path / "runs" / "premise-faitheval" / "premise.json").read_text())["all"]["n"] == 4
    assert len(server.requests) >= len(load_demo("dev"))  # the LLM line asked the stand-in endpoint
    judged = [json.loads(line) for line in (tmp_path / "runs" / "demo-majority-judged.jsonl").read_text().splitlines()]
    assert len(judged) == len(load_demo("dev")) and all(isinstance(r["verdict"], bool) for r in judged)
    o4 = [r for r in server.requests if r["model"] == "o4-mini"]
    assert o4 and all("max_completion_tokens" in r and r["reasoning_effort"] == "low" for r in o4)


def shown_under(page: str, command: str) -> list[str]:
    """The output a page shows under its ``$ COMMAND`` line (any block, whatever its marker)."""
    for name, _, lang, body in blocks():
        lines = body.splitlines()
        if name != page or lang != "console":
            continue
        for i, line in enumerate(lines):
            if line.strip() == f"$ {command}":
                rest = lines[i + 1 :]
                end = next((j for j, later in enumerate(rest) if later.strip().startswith("$ ")), len(rest))
                return rest[:end]
    raise AssertionError(f"{page} shows no `$ {command}`")


@pytest.mark.slow
def test_samples_of_commands_that_need_files_are_what_they_print(tmp_path):
    """The samples under examples that need a file: the file made as the page says, the command run."""
    import gzip
    import shutil

    from ifqa.datasets.demo import corpus_path, load_demo

    env = _env(tmp_path)
    with gzip.open(ROOT / "ifqa" / "demo" / "passages.jsonl.gz", "rt", encoding="utf-8") as packed:
        (tmp_path / "passages.jsonl").write_text(packed.read(), encoding="utf-8")
    assert corpus_path().exists()
    command = "ifqa index bm25 --corpus passages.jsonl -o indexes/demo-bm25"
    result = run_cli(*shlex.split(command)[1:], cwd=tmp_path, env=env)
    check_shown_output("retrieval.md", command, shown_under("retrieval.md", command), result.stdout)

    # evaluation.md's two made-up prediction files, made as its note under the sample says
    dev = load_demo("dev")
    for name, right in (("predictions.jsonl", lambda i: i % 3 != 2), ("closed-book.jsonl", lambda i: i % 4 == 0)):
        lines = [{"qid": e.qid, "prediction": e.answers[0] if right(i) else "no"} for i, e in enumerate(dev)]
        (tmp_path / name).write_text("".join(json.dumps(line) + "\n" for line in lines))
    command = "ifqa evaluate --predictions predictions.jsonl --compare closed-book.jsonl"
    result = run_cli(*shlex.split(command)[1:], cwd=tmp_path, env=env)
    check_shown_output("evaluation.md", command, shown_under("evaluation.md", command), result.stdout)

    # experiments.md's sample: the demo experiment, copied so that its results stay out of the checkout
    shutil.copy(ROOT / "experiments" / "demo.yaml", tmp_path / "demo.yaml")
    result = run_cli("experiment", "run", tmp_path / "demo.yaml", "--no-progress", cwd=tmp_path, env=env)
    command = "ifqa experiment run experiments/demo.yaml"
    check_shown_output("experiments.md", command, shown_under("experiments.md", command), result.stdout)
