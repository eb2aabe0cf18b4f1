"""The README is a front page and docs/ the reference: links resolve, and every console example
marked as running on the demo set runs (so the docs cannot drift from the code)."""

import re
import shlex
from pathlib import Path

import pytest

from tests.conftest import run_cli

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
MARK = "<!-- runs on the demo set"


def marked_commands() -> list[tuple[str, str]]:
    found = []
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        for block in re.findall(re.escape(MARK) + r"[^\n]*-->\n```console\n(.*?)```", text, flags=re.S):
            found += [(page.name, line[2:]) for line in block.splitlines() if line.startswith("$ ")]
    return found


def test_the_readme_fits_on_a_few_screens():
    assert len((ROOT / "README.md").read_text(encoding="utf-8").splitlines()) <= 250


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_links_resolve(page):
    for target in re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", page.read_text(encoding="utf-8")):
        if not target.startswith(("http://", "https://", "mailto:")):
            assert (page.parent / target).exists(), f"{page.name}: {target}"


def test_examples_are_marked():
    assert len(marked_commands()) >= 5


def test_marked_examples_run_in_order(tmp_path):
    env = {**__import__("os").environ, "IFQA_CACHE_DIR": str(tmp_path / "cache"), "HF_HUB_OFFLINE": "1"}
    for page, command in marked_commands():
        args = shlex.split(command)
        assert args[0] == "ifqa", f"{page}: {command}"
        result = run_cli(*args[1:], cwd=tmp_path, env=env)
        assert result.returncode == 0, f"{page}: {command}\n{result.stderr[-2000:]}"
