"""Experiment configs: YAML with ``${VAR}`` / ``${VAR:-default}`` from the environment, read into a
list of stages.

A config names the questions and then its stages, either as a ``stages:`` list of
``{stage: retrieve|read|evaluate|..., name: ...}`` entries or, for the common grid, as
``retrievers:`` (retrieve stages), ``trainers:`` (train stages) and ``readers:`` (read stages). Each stage type checks its own
keys; the runner knows none of them.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

from ifqa.configs import from_options
from ifqa.errors import IfqaError
from ifqa.judge.config import JudgeConfig
from ifqa.registry import DATASETS, STAGES

#: What ``enabled: "${IFQA_DENSE:-yes}"`` may say (from the environment): these switch a stage off ...
OFF_WORDS = ("", "0", "no", "false", "off")
#: ... and any of these is a switch at all.
SWITCH_WORDS = OFF_WORDS + ("1", "yes", "true", "on")

_VARIABLE = re.compile(r"\$\{(\w+)(?::-([^}]*))?\}")


def _expand(value: Any) -> Any:
    """``${VAR}`` and ``${VAR:-default}`` from the environment, recursively. A value that is one
    variable and nothing else takes the type its text has in YAML (``k: ${K:-5}`` is the number 5, as
    ``k: 5`` is); inside a longer string a variable stays text."""
    if isinstance(value, str):
        whole = _VARIABLE.fullmatch(value)
        if whole:
            return _scalar(os.environ.get(whole.group(1), whole.group(2) or ""))
        return _VARIABLE.sub(lambda m: os.environ.get(m.group(1), m.group(2) or ""), value)
    if isinstance(value, list):
        return [_expand(v) for v in value]
    if isinstance(value, dict):
        return {k: _expand(v) for k, v in value.items()}
    return value


def _scalar(text: str) -> Any:
    """A substituted value as YAML reads it where it is a number or a boolean; otherwise the text."""
    import yaml

    try:
        parsed = yaml.safe_load(text) if text.strip() else text
    except yaml.YAMLError:
        return text
    return parsed if isinstance(parsed, (bool, int, float)) else text


SAFE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]{0,127}")  # a file name, never a path
MAX_BYTES = 1 << 20
MAX_NODES = 100_000  # values after YAML aliases are expanded: a "billion laughs" file stops here


def _check_size(config: Any, path: Path) -> None:
    count, stack = 0, [config]
    while stack:
        value = stack.pop()
        count += 1
        if count > MAX_NODES:
            raise IfqaError(f"expands to more than {MAX_NODES:,} values (YAML aliases?); refusing it", path)
        if isinstance(value, dict):
            stack.extend(value.values())
            stack.extend(value.keys())
        elif isinstance(value, list):
            stack.extend(value)


def _mapping(value: Any, what: str, path: Path) -> dict:
    if not isinstance(value, dict):
        raise IfqaError(f"{what} must be a mapping, found {type(value).__name__}", path)
    return value


def stage_list(config: dict, path: Path) -> list[dict]:
    """The stages in order: ``stages:`` as given, else retrievers, trainers, then readers."""
    if "stages" in config:
        if not isinstance(config["stages"], list):
            raise IfqaError("'stages' must be a list", path)
        stages = [dict(_mapping(s, "each stage", path)) for s in config["stages"]]
    else:
        stages = []
        for key, kind in (("retrievers", "retrieve"), ("trainers", "train"), ("readers", "read")):
            entries = config.get(key) or []
            if not isinstance(entries, list):
                raise IfqaError(f"'{key}' must be a list", path)
            stages += [{"stage": kind, **_mapping(entry, f"each entry of '{key}'", path)} for entry in entries]
    names: dict[str, str] = {}  # the earlier stages and their types: what a stage may refer to
    for stage in stages:
        if "name" not in stage:
            raise IfqaError(f"a {stage.get('stage', '?')} stage needs a 'name'", path)
        if not isinstance(stage["name"], str) or not SAFE_NAME.fullmatch(stage["name"]):
            raise IfqaError(
                f"stage name {stage['name']!r}: use letters, digits, '.', '_', '+' and '-' (it names files "
                "under the output folder)",
                path,
            )
        if stage["name"] in names:
            raise IfqaError(f"two stages are named {stage['name']!r}", path)
        if not isinstance(stage.get("stage"), str) or stage["stage"] not in STAGES:
            raise IfqaError(
                f"stage {stage['name']!r}: unknown type {stage.get('stage')!r}; "
                f"choose from {', '.join(STAGES.names())}",
                path,
            )
        STAGES.get(stage["stage"]).check(stage, names, path)
        names[stage["name"]] = stage["stage"]
    return stages


def _check_questions(value: Any, what: str, path: Path) -> None:
    """``questions:`` / ``train:``: a known setting and split, or a file."""
    questions = _mapping(value, what, path)
    unknown = set(questions) - {"setting", "split", "file"}
    if unknown:
        raise IfqaError(f"{what}: unknown key(s) {', '.join(sorted(unknown))}; known: setting, split, file", path)
    for key in ("setting", "split", "file"):
        if questions.get(key) is not None and not isinstance(questions[key], str):
            raise IfqaError(f"{what}: '{key}' must be a string, got {questions[key]!r}", path)
    if questions.get("setting") and questions["setting"] not in DATASETS:
        raise IfqaError(
            f"{what}: unknown setting {questions['setting']!r}; choose from {', '.join(DATASETS.names())}", path
        )
    if questions.get("split") and questions["split"] not in ("train", "dev", "test"):
        raise IfqaError(f"{what}: unknown split {questions['split']!r}; choose from train, dev, test", path)


#: The keys an experiment config may hold at its top level (each stage's own are its type's KEYS).
TOP_KEYS = frozenset(
    {"name", "questions", "train", "k", "output", "stages", "retrievers", "trainers", "readers", "judge"}
)


class _KeyProblem(Exception):
    def __init__(self, message: str, line: int):
        super().__init__(message)
        self.line = line


def _strict_loader():
    """PyYAML's SafeLoader refusing what it would quietly accept: a key given twice in one mapping
    (the last would win) and a key that is not a string (a number, a list), each with its line."""
    import yaml

    class StrictLoader(yaml.SafeLoader):
        def construct_mapping(self, node, deep=False):
            seen: dict = {}
            for key_node, _ in node.value:
                if key_node.tag == "tag:yaml.org,2002:merge":  # '<<: *defaults': its keys may be overridden
                    continue
                key = self.construct_object(key_node, deep=True)
                line = key_node.start_mark.line + 1
                if not isinstance(key, str):
                    raise _KeyProblem(f"key {key!r} is not a name (keys are strings)", line)
                if key in seen:
                    raise _KeyProblem(f"key {key!r} given twice (first on line {seen[key]})", line)
                seen[key] = line
            return super().construct_mapping(node, deep=deep)

    return StrictLoader


def _line_of(path: Path, key: str) -> int | None:
    """The line where a top-level ``key:`` stands."""
    for number, line in enumerate(path.read_text(encoding="utf-8-sig").splitlines(), start=1):
        if line.startswith(f"{key}:") or line.startswith(f"{key} :"):
            return number
    return None


def _is_pipe(path: Path) -> bool:
    import stat

    try:
        return stat.S_ISFIFO(path.stat().st_mode)
    except OSError:
        return False


def load_config(path: str | Path) -> dict:
    import yaml

    path = Path(path)
    if not path.exists():
        raise IfqaError("no such file", path)
    if not path.is_file() and not _is_pipe(path):  # `ifqa experiment run <(...)` reads a pipe: a valid source
        raise IfqaError("not a regular file (an experiment is a YAML file)", path)
    with open(path, "rb") as handle:  # read at most the limit: a reported size can lie (0 for a device)
        data = handle.read(MAX_BYTES + 1)
    if len(data) > MAX_BYTES:
        raise IfqaError(f"an experiment config of more than {MAX_BYTES:,} bytes; at most {MAX_BYTES:,}", path)
    try:
        text = data.decode("utf-8-sig")
        config = yaml.load(text, Loader=_strict_loader())  # noqa: S506 - a SafeLoader
    except _KeyProblem as exc:
        raise IfqaError(str(exc), path, exc.line) from None
    except UnicodeDecodeError as exc:
        raise IfqaError(f"not UTF-8 text ({exc.reason} at byte {exc.start})", path) from None
    except RecursionError:
        raise IfqaError("invalid YAML (nested too deeply)", path) from None
    except yaml.YAMLError as exc:
        line = getattr(getattr(exc, "problem_mark", None), "line", None)
        raise IfqaError(
            f"invalid YAML ({getattr(exc, 'problem', exc)})", path, line + 1 if line is not None else None
        ) from None
    _check_size(config, path)
    if not isinstance(config, dict) or "name" not in config or "questions" not in config:
        raise IfqaError("an experiment needs at least 'name' and 'questions'", path)
    unknown = sorted(set(config) - TOP_KEYS)
    if unknown:  # a typo of 'stages' would otherwise run an experiment of no stages
        raise IfqaError(
            f"unknown key {unknown[0]!r}; an experiment has {', '.join(sorted(TOP_KEYS))}",
            path,
            _line_of(path, unknown[0]),
        )
    config = _expand(config)
    if not isinstance(config["name"], str) or not SAFE_NAME.fullmatch(config["name"]):
        raise IfqaError(
            f"experiment name {config['name']!r}: use letters, digits, '.', '_', '+' and '-' (it names "
            "the results folder)",
            path,
        )
    if "output" in config and (not isinstance(config["output"], str) or not config["output"].strip()):
        raise IfqaError(f"'output' must be a folder, got {config['output']!r}", path)
    _check_questions(config["questions"], "'questions'", path)
    if "train" in config:
        _check_questions(config["train"], "'train'", path)
    config["k"] = config.get("k", 20)
    if isinstance(config["k"], bool) or not isinstance(config["k"], int):
        raise IfqaError(f"'k' must be an integer, got {config['k']!r}", path)
    if config["k"] < 1:
        raise IfqaError(f"'k' must be at least 1, got {config['k']}", path)
    if "judge" in config:  # the LLM judge of every reader's predictions: ifqa judge's settings
        if not isinstance(config["judge"], dict):
            raise IfqaError(f"'judge' holds the judge's settings (model, base_url ...), got {config['judge']!r}", path)
        from_options(JudgeConfig, config["judge"], where=f"{path}: judge")
    config["_stages"] = stage_list(config, path)
    if not config["_stages"]:
        raise IfqaError("no stages: give 'stages' (or 'retrievers' / 'readers') with at least one", path)
    config["_root"] = str(Path.cwd() if _is_pipe(path) else path.parent.resolve())  # a pipe: paths are the shell's
    config["_path"] = str(path)
    return config


def output_dir(config: str | Path | dict) -> Path:
    """Where an experiment's results go (``config``: a loaded config, or its file)."""
    config = config if isinstance(config, dict) else load_config(config)
    return Path(config["_root"]) / Path(config.get("output", f"results/{config['name']}")).expanduser()
