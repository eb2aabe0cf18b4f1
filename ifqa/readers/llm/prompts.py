"""Prompts for the LLM readers: templates from prompts/, demonstrations from the training split.

A prompt = instruction + K demonstrations + the query. Demonstrations are chosen per question
(``random`` with a seed, or ``similar``: BM25 over the training questions), with chain-of-thought
rationales from ``rationales.jsonl`` for the modes that need them. ``fit`` makes a prompt fit
the model's window: first passages are shortened, then demonstrations dropped, and it says so.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import random
import re
import string
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

from ifqa.errors import IfqaError
from ifqa.retrieval.queries import split_premise

log = logging.getLogger(__name__)

MODES = ("qa", "cot", "genread", "open", "context")
_SECTION = re.compile(r"^\[(instruction|demonstration|query)\]\s*$", re.MULTILINE)


@dataclass(frozen=True)
class Template:
    name: str
    instruction: str
    demonstration: str
    query: str


def prompts_dir(override: str | Path | None = None) -> Path:
    """``override``, else ``$IFQA_PROMPTS_DIR``, else the installed ``ifqa.prompts`` (a checkout run from
    PYTHONPATH, not installed, as on a lent GPU machine: the repository's own ``prompts/``)."""
    if override or os.environ.get("IFQA_PROMPTS_DIR"):
        return Path(override or os.environ["IFQA_PROMPTS_DIR"])
    try:
        return Path(str(resources.files("ifqa.prompts")))
    except ModuleNotFoundError:  # installing maps prompts/ to ifqa.prompts (pyproject.toml's package-dir)
        return Path(__file__).resolve().parents[3] / "prompts"


def load_whole_prompt(
    name: str, fields: tuple[str, ...], directory: str | Path | None = None, optional: tuple[str, ...] = ()
) -> tuple[str, str]:
    """A prompt file read whole (``judge.txt``, ``twin.txt``, ``iterative_*.txt``), its ``fields``
    required and no placeholder beyond them and ``optional``, and its SHA-256 (recorded beside what it
    made, so a changed prompt is a different judge or twin)."""
    path = prompts_dir(directory) / f"{name}.txt"
    if not path.is_file():
        raise IfqaError(f"no {name} prompt ({name}.txt) in the prompts folder", path)
    text = path.read_text(encoding="utf-8")
    check_placeholders(text, fields + optional, path)
    for wanted in fields:
        if "{" + wanted + "}" not in text:
            raise IfqaError(f"the {name} prompt lacks the field {{{wanted}}}", path)
    return text, hashlib.sha256(text.encode("utf-8")).hexdigest()


def check_placeholders(text: str, filled: Sequence[str], path: str | Path) -> None:
    """Refuse, in one line naming the file, a template ifqa could not fill: a placeholder it does not
    fill, or a lone brace (checked once, when the template is loaded, never mid-run)."""
    try:
        found = [name for _, name, _, _ in string.Formatter().parse(text) if name is not None]
    except ValueError as exc:
        raise IfqaError(f"the template has a lone brace ({exc}); write a literal brace as {{{{ or }}}}", path) from None
    for name in found:
        if name not in filled:
            shown = "{}" if name == "" else "{" + name + "}"
            raise IfqaError(
                f"the template has the placeholder {shown}, which ifqa does not fill (it fills "
                f"{', '.join('{' + f + '}' for f in filled)}); write a literal brace as {{{{ or }}}}",
                path,
            )


def load_template(name: str, directory: str | Path | None = None) -> Template:
    """A reader's template by name, with or without its ``.txt`` (the name is what cards record)."""
    name = name.removesuffix(".txt")
    folder = prompts_dir(directory)
    path = folder / f"{name}.txt"
    if not path.exists():
        known = ", ".join(sorted(p.stem for p in folder.glob("*.txt")))
        raise IfqaError(f"no such prompt template (the folder has: {known})", path)
    parts = _SECTION.split(path.read_text(encoding="utf-8"))
    sections = {parts[i]: parts[i + 1].strip("\n") for i in range(1, len(parts) - 1, 2)}
    missing = {"instruction", "demonstration", "query"} - sections.keys()
    if missing:
        raise IfqaError(f"template lacks section(s) {', '.join(sorted(missing))}", path)
    for section in ("demonstration", "query"):  # the instruction is shown as written, never filled
        check_placeholders(sections[section], ("question", "premise", "answer", "rationale", "passages"), path)
    return Template(name, sections["instruction"], sections["demonstration"], sections["query"])


def template_name(mode: str, cot: bool, task: str = "qa", directory: str | Path | None = None) -> str:
    """The template file of a mode for a task (``cot`` mode always reasons; ``--cot`` adds it to the others).

    IfQA (task ``qa``) has ``qa``, ``cot``, ``genread[_cot]``, ``open[_cot]``; its ``context`` mode
    reads each question's gold passages with the open-book template (an oracle). Other tasks have
    ``<task>_<mode>[_cot]`` files (``wiqa_context``, ``causalqa_open`` ...), ``cot`` meaning ``qa`` with reasoning.
    """
    if mode not in MODES:
        raise IfqaError(f"unknown mode {mode!r}; choose from {', '.join(MODES)}")
    if task == "qa":
        if mode in ("qa", "cot"):
            return mode
        base = "open" if mode == "context" else mode
        return f"{base}_cot" if cot else base
    reasoning = cot or mode == "cot"
    name = f"{task}_{'qa' if mode == 'cot' else mode}{'_cot' if reasoning else ''}"
    folder = prompts_dir(directory)
    if not (folder / f"{name}.txt").exists():
        available = sorted(p.stem for p in folder.glob(f"{task}_*.txt"))
        raise IfqaError(
            f"no {mode}{' + chain-of-thought' if reasoning else ''} template for {task} "
            f"({name}.txt); its templates: {', '.join(available) or 'none'}",
            folder,
        )
    return name


def needs_rationale(name: str) -> bool:
    return name == "cot" or name.endswith("_cot")


def load_rationales(setting: str | None = None, directory: str | Path | None = None) -> dict[str, str]:
    """``question sha1 -> rationale``. A rationale belongs to a question's text, not to the setting it
    was written for, so a demonstration pool named by file (``--train FILE``) finds them too; where
    two settings' rationales for one question differ, ``setting``'s is taken."""
    path = prompts_dir(directory) / "rationales.jsonl"
    if not path.exists():
        return {}
    found: dict[str, str] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip():
            record = json.loads(line)
            if record["question_sha1"] not in found or record["setting"] == setting:
                found[record["question_sha1"]] = record["rationale"]
    return found


def question_sha1(question: str) -> str:
    return hashlib.sha1(question.encode("utf-8")).hexdigest()


@dataclass
class Demo:
    question: str
    answer: str
    passages: list[str]
    rationale: str = ""


@dataclass
class Prompt:
    """A built prompt and what went into it (kept in the predictions file for inspection)."""

    text: str
    demos: int
    passages: int
    notes: list[str] = field(default_factory=list)
    tokens: int = 0


def pool(
    train: Sequence,
    rationales: dict[str, str] | None,
    exclude: set[str],
    show: Callable[[object], tuple[str, str]] = lambda e: (e.question, e.answers[0]),
) -> list[Demo]:
    """Candidate demonstrations: training examples (minus test questions), with rationales if asked
    (found by the SHA-1 of the question's text; examples without one are left out); ``show``: the
    question and answer as the prompt writes them."""
    demos = []
    for example in train:
        if example.question.strip() in exclude:
            continue
        rationale = ""
        if rationales is not None:
            rationale = rationales.get(question_sha1(example.question), "")
            if not rationale:
                continue
        demos.append(Demo(*show(example), list(example.context), rationale))
    return demos


class DemoSelector:
    """Picks K demonstrations per question, deterministically for a given seed."""

    def __init__(self, demos: list[Demo], k: int, strategy: str = "random", seed: int = 0):
        if strategy not in ("random", "similar"):
            raise IfqaError(f"unknown demonstration selection {strategy!r}; choose random or similar")
        self.demos, self.k, self.strategy, self.seed = demos, k, strategy, seed
        if k > len(demos):
            log.warning("asked for %d demonstrations, only %d available", k, len(demos))
        self._index = None
        if strategy == "similar" and demos and k:
            # BM25 over the training questions, for similar demonstrations alone
            from ifqa.retrieval.bm25 import MemoryBM25

            self._index = MemoryBM25([d.question for d in demos])

    def select(self, qid: str, question: str) -> list[Demo]:
        """K demonstrations for this question; the question itself is never one of them."""
        asked = question.strip()
        candidates = [d for d in self.demos if d.question.strip() != asked]
        k = min(self.k, len(candidates))
        if k == 0:
            return []
        if self._index is not None:
            found = self._index.top(question, k + len(self.demos) - len(candidates))
            if found:
                chosen = [self.demos[i] for i in found if self.demos[i].question.strip() != asked][:k]
                return chosen[::-1]  # most similar last, nearest to the query
        rng = random.Random(f"{self.seed}:{qid}")
        return rng.sample(candidates, k)


def number_passages(passages: Sequence[str | dict], words: int | None = None) -> str:
    """``[1] Title: text`` lines (a single passage goes unnumbered); ``words`` truncates each text."""
    lines = []
    for number, passage in enumerate(passages, start=1):
        title, text = (
            (passage.get("title", ""), passage.get("text", "")) if isinstance(passage, dict) else ("", passage)
        )
        if words is not None:
            text = " ".join(text.split()[:words])
        label = f"[{number}] " if len(passages) > 1 else ""
        lines.append(f"{label}{title + ': ' if title else ''}{text}")
    return "\n".join(lines)


def premise_of(question: str) -> str:
    """The question's counterfactual premise ("If X"), as a premise-first template states it apart; the
    question itself where it has none."""
    return split_premise(question)[0] or question


def render(
    template: Template, question: str, demos: Sequence[Demo], passages: Sequence[str | dict], words: int | None = None
) -> str:
    shown = [(template.demonstration, d.question, d.answer, d.rationale, d.passages) for d in demos]
    shown.append((template.query, question, "", "", passages))  # the query: the answer is the model's to write
    blocks = [
        t.format(question=q, premise=premise_of(q), answer=a, rationale=r, passages=number_passages(p, words))
        for t, q, a, r, p in shown
    ]
    return "\n\n".join([template.instruction, *blocks])


def fit(
    template: Template,
    question: str,
    demos: list[Demo],
    passages: Sequence[str | dict],
    count_tokens: Callable[[str], int],
    budget: int,
    remedy: str = "raise --max-prompt-tokens or lower --passages",
) -> Prompt:
    """The longest prompt within ``budget`` tokens: shorten passages, then drop demonstrations;
    ``remedy`` names the user's own options that set the budget."""
    words = max(
        [len(str(p.get("text", "") if isinstance(p, dict) else p).split()) for p in passages]
        + [len(p.split()) for d in demos for p in d.passages]
        + [1]
    )
    tries = [(0, None)]  # (demonstrations dropped, words a passage keeps): whole, then shorter, then fewer
    while words > 20:
        words = max(20, words * 3 // 4)
        tries.append((0, words))
    tries += [(dropped, words) for dropped in range(1, len(demos) + 1)]  # the farthest from the query first
    for dropped, cut in tries:
        text = render(template, question, demos[dropped:], passages, cut)
        tokens = count_tokens(text)
        if tokens <= budget:
            notes = [f"passages cut to {cut} words"] if cut else []
            notes += [f"{dropped} demonstration(s) dropped"] if dropped else []
            return Prompt(text, len(demos) - dropped, len(passages), notes, tokens)
    raise IfqaError(
        f"the prompt does not fit in {budget} tokens even without demonstrations (question {question[:50]!r}); {remedy}"
    )
