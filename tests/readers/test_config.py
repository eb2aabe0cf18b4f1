"""One reader configuration: built from CLI options and from YAML by the same function, and the
command shown in results reruns exactly that configuration (every field)."""

import dataclasses
import shlex

import pytest

from ifqa.cli.read import read
from ifqa.configs import from_options, option_fields
from ifqa.errors import IfqaError
from ifqa.experiments import run_experiment
from ifqa.readers.fid import FiDReaderConfig
from ifqa.readers.llm.config import LLMReaderConfig

NON_DEFAULT = {
    "model": "m/odel:1",
    "mode": "open",
    "cot": True,
    "backend": "hf",
    "base_url": "http://h:1/v1",
    "completions": True,
    "passages": 3,
    "demos": 2,
    "selection": "similar",
    "train": "pool file.json",
    "seed": 3,
    "samples": 5,
    "temperature": 0.9,
    "max_tokens": 7,
    "max_prompt_tokens": 900,
    "concurrency": 2,
    "timeout": 5.5,
    "retries": 1,
    "batch_size": 3,
    "cache": "c.sqlite",
    "no_cache": True,
    "prompts_dir": "p",
    "device": "cpu",
    "thinking": "on",
    "thinking_budget": 3,
    "reasoning_effort": "low",
    "model_threads": 2,
    "context_window": 2048,
    "gguf_weights": "file",
    "dtype": "bfloat16",
    "template": "factual_qa",
}


def _parse(command: str):
    """What `ifqa read NAME ...` would build from a shown command."""
    words = shlex.split(command)
    assert words[:2] == ["ifqa", "read"]
    sub = read.get_command(None, words[2])
    context = sub.make_context(words[2], words[3:])
    options = {k: v for k, v in context.params.items() if k in {f.name for f in option_fields(sub_config(words[2]))}}
    return from_options(sub_config(words[2]), options), context.params


def sub_config(name):
    return {"llm": LLMReaderConfig, "fid": FiDReaderConfig}[name]


def test_every_llm_field_is_tested_and_round_trips_through_the_command():
    assert set(NON_DEFAULT) == {f.name for f in option_fields(LLMReaderConfig)}
    from ifqa.datasets import QuestionSource
    from ifqa.readers import reader_command

    config = from_options(LLMReaderConfig, NON_DEFAULT)
    command = reader_command("llm", config, QuestionSource("demo", "dev"), "runs/r.jsonl")
    rebuilt, params = _parse(command)
    assert rebuilt == config and params["run_path"] == "runs/r.jsonl" and params["setting"] == "demo"
    for name, value in NON_DEFAULT.items():  # one field at a time, the others at their defaults
        single = from_options(LLMReaderConfig, {name: value})
        assert _parse(reader_command("llm", single, QuestionSource(), None))[0] == single, name


def test_every_field_given_at_its_default_is_written_back_as_given():
    """An option given at its default (which a trained reader's card would otherwise fill) is in the command
    shown, and that command builds it given again; a flag given at its default writes nothing (its flag
    would turn it over)."""
    from ifqa.configs import field_default
    from ifqa.datasets import QuestionSource
    from ifqa.readers import reader_command

    for field in option_fields(LLMReaderConfig):
        default = field_default(field)
        if default is None or default == []:  # left unset: nothing to give
            continue
        config = from_options(LLMReaderConfig, {field.name: default})
        assert config.given == (field.name,), field.name
        rebuilt = _parse(reader_command("llm", config, QuestionSource(), None))[0]
        assert rebuilt == config, field.name
        assert rebuilt.given == (() if isinstance(default, bool) else (field.name,)), field.name


def test_fid_round_trip():
    from ifqa.datasets import QuestionSource
    from ifqa.readers import reader_command

    config = FiDReaderConfig(checkpoint="ck", beams=4, batch_size=2, n_context=10, device="cpu")
    assert {f.name for f in option_fields(FiDReaderConfig)} == set(dataclasses.asdict(config))
    assert _parse(reader_command("fid", config, QuestionSource(file="q.json"), "r.jsonl"))[0] == config


def test_the_experiment_runner_shows_the_command_of_its_configuration(tmp_path, monkeypatch):
    monkeypatch.setenv("IFQA_CACHE_DIR", str(tmp_path / "cache"))
    entry = {k: v for k, v in NON_DEFAULT.items() if k not in ("model", "train")}
    path = tmp_path / "e.yaml"
    path.write_text(
        "name: e\nquestions: {setting: demo, split: dev}\noutput: out\nreaders:\n  - "
        + str({"name": "r", **entry}).replace("'", '"').replace("True", "true")
        + "\n"
    )
    row = run_experiment(path, progress=False)["readers"][0]
    assert row["status"] == "skipped: no model configured"
    rebuilt, _ = _parse(row["command"])
    assert rebuilt == from_options(LLMReaderConfig, {**entry, "model": "MODEL"})


def test_temperature_follows_samples():
    assert LLMReaderConfig().effective_temperature == 0.0
    assert LLMReaderConfig(samples=3).effective_temperature == 0.7
    assert LLMReaderConfig(samples=3, temperature=0.2).effective_temperature == 0.2


@pytest.mark.parametrize(
    "options, message",
    [
        ({"samples": 0}, "samples must be at least 1"),
        ({"demos": -1}, "demos must be at least 0"),
        ({"passages": "x"}, "must be an integer"),
        ({"mode": "oracle"}, "must be one of qa, cot"),
        ({"modle": "qa"}, "unknown key"),
        ({"cot": "yes"}, "must be true or false"),
    ],
)
def test_bad_values_are_one_line(options, message):
    with pytest.raises(IfqaError, match=message):
        from_options(LLMReaderConfig, options, where="e.yaml")


def test_read_reader_alias(cli):
    assert "--demo-selection" in cli("read", "--reader", "llm", "--help").stdout
    assert "--beams" in cli("read", "--reader=fid", "--help").stdout
