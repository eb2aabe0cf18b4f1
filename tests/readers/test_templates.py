"""Every template ifqa ships, broken two ways in a --prompts-dir of one's own (a placeholder ifqa does not
fill, a lone brace), is refused when the command that reads it loads it: one line naming the file and
what is wrong, no request sent, nothing written. The installed folder is walked, so a new template is
covered without a new row here."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ifqa.datasets.demo import load_demo
from ifqa.readers.llm.prompts import prompts_dir
from tests.readers.fake_openai import FakeOpenAI

INSTALLED = prompts_dir()  # the installed ifqa.prompts (in a checkout not installed, its prompts/)
TEMPLATES = sorted(p.stem for p in INSTALLED.glob("*.txt"))
DEV = load_demo("dev")


def _command(name: str, folder: Path, url: str, tmp_path: Path) -> list:
    """The command that loads template ``name``."""
    out = tmp_path / "out.jsonl"
    model = ["--model", "m", "--base-url", url, "--prompts-dir", folder, "-o", out, "--no-progress"]
    if name == "judge":
        predictions = tmp_path / "p.jsonl"
        predictions.write_text("".join(json.dumps({"qid": e.qid, "prediction": e.answers[0]}) + "\n" for e in DEV))
        return ["judge", "--predictions", predictions, *model]
    if name == "twin":
        predictions = tmp_path / "p.jsonl"
        predictions.write_text("".join(json.dumps({"qid": e.qid, "prediction": e.answers[0]}) + "\n" for e in DEV))
        manifest = {"reader": "llm", "config": {"model": "m", "base_url": url}}
        Path(f"{predictions}.manifest.json").write_text(json.dumps(manifest))
        return ["analyze", "premise", "--predictions", predictions, "--twins", "llm", "-o", tmp_path / "premise"]
    if name.startswith("iterative_"):
        protocol = "ircot" if name.endswith("ircot") else "search-tags"
        return ["read", "iterative", "--protocol", protocol, *model]
    return ["read", "llm", "--template", name, "--demos", "0", *model]


def _break(folder: Path, name: str, broken: str) -> Path:
    """``folder``: a copy of the installed templates, ``name`` broken with ``broken`` where ifqa fills it
    (a sectioned template's instruction is shown as written, its query is filled)."""
    shutil.copytree(INSTALLED, folder, ignore=shutil.ignore_patterns("*.py", "__pycache__"))
    path = folder / f"{name}.txt"
    text = path.read_text()
    path.write_text(text.replace("[query]\n", f"[query]\n{broken} ") if "[query]" in text else f"{broken} {text}")
    return path


BROKEN = [("{bogus}", "the placeholder {bogus}"), ("{", "a lone brace")]


@pytest.mark.parametrize("name", TEMPLATES)
@pytest.mark.parametrize("broken, expected", BROKEN)
def test_every_template_is_checked_by_its_loader(tmp_path, name, broken, expected):
    """The loaders every command reads templates through: a sectioned one (``[query]``), or a whole one
    with the fields its command fills."""
    from ifqa.errors import IfqaError
    from ifqa.readers.iterative import IterativeConfig, load_template
    from ifqa.readers.llm import prompts

    path = _break(tmp_path / "prompts", name, broken)
    with pytest.raises(IfqaError) as refused:
        if "[query]" in path.read_text():
            prompts.load_template(name, path.parent)
        elif name.startswith("iterative_"):
            load_template(
                IterativeConfig(
                    protocol="ircot" if name.endswith("ircot") else "search-tags", prompts_dir=str(path.parent)
                )
            )
        else:
            fields = {"judge": ("question", "answers", "prediction"), "twin": ("question",)}[name]
            prompts.load_whole_prompt(name, fields, path.parent)
    assert str(path) in str(refused.value) and expected in str(refused.value)


@pytest.mark.parametrize("name", ["qa", "judge", "twin", "iterative_search"])
def test_a_template_ifqa_cannot_fill_is_one_line_when_its_command_loads_it(cli, tmp_path, name):
    """Each command that reads templates, once: refused before any request, nothing written."""
    folder = tmp_path / "prompts"
    path = _break(folder, name, "{bogus}")
    # $IFQA_PROMPTS_DIR for the commands without --prompts-dir (analyze premise's twins)
    env = {
        **os.environ,
        "IFQA_CACHE_DIR": str(tmp_path / "cache"),
        "OPENAI_API_KEY": "k",
        "IFQA_PROMPTS_DIR": str(folder),
    }
    with FakeOpenAI({}) as server:
        result = cli(*_command(name, folder, server.url, tmp_path), env=env)
        assert not server.requests
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 1 and len(lines) == 1 and "Traceback" not in result.stderr, result.stderr[-1500:]
    assert str(path) in lines[0] and "the placeholder {bogus}" in lines[0], lines[0]
    assert not (tmp_path / "out.jsonl").exists() and not (tmp_path / "premise").exists()


def test_a_checkout_run_from_pythonpath_reads_its_own_templates(tmp_path):
    """Not installed, with the checkout on PYTHONPATH (how a lent GPU machine runs it), ``ifqa.prompts``
    does not exist (installing maps prompts/ to it): the templates are the repository's prompts/."""
    root = Path(__file__).resolve().parents[2]
    script = (
        "import sys\n"
        "sys.meta_path[:] = [f for f in sys.meta_path if not getattr(f, '__module__', '').startswith('__editable__')]\n"
        f"sys.path.insert(0, {str(root)!r})\n"
        "from ifqa.readers.llm.prompts import load_template, prompts_dir\n"
        "load_template('qa')\n"
        "print(' '.join(sorted(p.stem for p in prompts_dir().glob('*.txt'))))\n"
    )
    env = {k: v for k, v in os.environ.items() if k not in ("IFQA_PROMPTS_DIR", "PYTHONPATH")}
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=tmp_path, env=env)
    assert done.returncode == 0, done.stderr[-1500:]
    assert done.stdout.split() == TEMPLATES


def test_a_premise_first_template_states_the_premise_apart():
    """``{premise}``: the question's "If ..." clause (split off at its first comma), or the question itself."""
    from ifqa.readers.llm import prompts

    template = prompts.load_template("open_premise")
    question = "If the river dried up, what would the bridge cross?"
    demo = prompts.Demo("If the sea rose, which city would flood first?", "Venice", ["Venice is on a lagoon."])
    text = prompts.render(template, question, [demo], [{"title": "Bridge", "text": "The bridge crosses the river."}])
    assert "Premise: If the river dried up\n" in text and "Premise: If the sea rose\n" in text
    assert text.rstrip().endswith(f"Question: {question}\nAnswer:")
    assert prompts.premise_of("What is the capital of France?") == "What is the capital of France?"


def test_a_template_is_named_with_or_without_its_file_suffix_and_an_unknown_one_lists_the_known():
    """``--template open_premise.txt`` (the file's name) and ``open_premise`` are one template; a name
    that is neither says which names the folder holds."""
    from ifqa.errors import IfqaError
    from ifqa.readers.llm import prompts

    assert prompts.load_template("open_premise.txt") == prompts.load_template("open_premise")
    with pytest.raises(IfqaError, match=r"no such prompt template \(the folder has: .*open_premise"):
        prompts.load_template("open_premiss")
