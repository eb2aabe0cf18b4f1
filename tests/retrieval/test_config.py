"""Retrieval settings are declared once (``RetrievalConfig``): every field is an option of
``ifqa retrieve`` and ``ifqa serve`` and a key of an experiment's retrieve stages, and a value given
through any of them reaches the same config. The fields are walked, so a new setting is covered
without a new row here."""

from __future__ import annotations

import dataclasses
import typing

import pytest

from ifqa.configs import field_default, option_fields, to_args
from ifqa.errors import IfqaError
from ifqa.retrieval.config import RetrievalConfig

#: Valid non-default values that depend on other fields (two indexes need two weights).
DEPENDENT = {
    "weights": [0.3, 0.7],
    "device": "cpu",
    "rewrite_device": "cpu",
    "query_mode": "rewrite",
}  # devices: checked as parsed; rewrite_*: a mode that asks a model


def _other_value(field: dataclasses.Field):
    """A valid value of ``field`` that is not its default."""
    if field.name in DEPENDENT:
        return DEPENDENT[field.name]
    default, meta = field_default(field), field.metadata
    if meta.get("choices") is not None:
        return next(name for name in meta["choices"] if name != default)
    if isinstance(default, bool):
        return True
    if isinstance(default, (int, float)):
        return default + 1
    if default is None and int in typing.get_args(typing.get_type_hints(RetrievalConfig)[field.name]):
        return max(2, meta.get("min") or 0)  # a count whose default is decided at run time
    if isinstance(default, list):
        return [*default, "second-index"]
    return f"{field.name}-value"


@pytest.fixture(scope="module")
def changed() -> RetrievalConfig:
    """Every setting away from its default at once."""
    return RetrievalConfig(**{f.name: _other_value(f) for f in option_fields(RetrievalConfig)})


def test_every_field_differs_from_its_default_in_the_fixture(changed):
    same = [f.name for f in option_fields(RetrievalConfig) if getattr(changed, f.name) == field_default(f)]
    assert not same


def test_every_setting_is_an_option_of_ifqa_retrieve(changed):
    from ifqa.cli.options import retrieval_config
    from ifqa.cli.retrieve import RETRIEVE_DEFAULTS, retrieve

    context = retrieve.make_context("retrieve", to_args(changed))
    assert retrieval_config(context.params, RETRIEVE_DEFAULTS) == changed


def test_every_setting_is_an_option_of_ifqa_serve_or_set_the_way_it_says(changed):
    from ifqa.cli.options import retrieval_config
    from ifqa.cli.serve import SERVED_OTHERWISE, serve

    served = dataclasses.replace(
        changed, **{name: field_default(RetrievalConfig.__dataclass_fields__[name]) for name in SERVED_OTHERWISE}
    )
    context = serve.make_context("serve", to_args(served))
    fixed = {name: getattr(served, name) for name in SERVED_OTHERWISE}
    assert retrieval_config(context.params, **fixed) == served
    assert set(SERVED_OTHERWISE) <= {f.name for f in option_fields(RetrievalConfig)}


def test_every_setting_is_a_key_of_an_experiments_retrieve_stage(changed):
    from ifqa.experiments.stages import RetrieveStage, retrieval_config

    spec = {"name": "run", "kind": "retrieve", **dataclasses.asdict(changed)}
    assert set(dataclasses.asdict(changed)) <= RetrieveStage.KEYS
    assert retrieval_config(spec, lambda value: value, 20) == changed


def test_a_stage_key_is_checked_as_the_option_is(tmp_path):
    from ifqa.errors import IfqaError
    from ifqa.experiments.stages import retrieval_config

    with pytest.raises(IfqaError, match=r"stage 'run'.*rerank_runtime must be one of torch"):
        retrieval_config({"indexes": ["demo:bm25"], "rerank": "r", "rerank_runtime": "tpu"}, str, 20, "stage 'run'")
    with pytest.raises(IfqaError, match=r"stage 'run'.*rerank_depth \(--rerank-depth\) applies to rerank"):
        retrieval_config({"indexes": ["demo:bm25"], "rerank_depth": 5}, str, 20, "stage 'run'")
    with pytest.raises(IfqaError, match=r"stage 'run'.*rewrite_model \(--rewrite-model\) applies to a query mode"):
        retrieval_config({"indexes": ["demo:bm25"], "rewrite_model": "m"}, str, 20, "stage 'run'")


def test_a_former_key_reads_as_its_new_name_and_says_so(caplog):
    from ifqa.configs import from_options

    with caplog.at_level("WARNING", logger="ifqa"):
        old = from_options(RetrievalConfig, {"rerank_backend": "onnx", "rerank": "r"}, where="e.yaml")
    assert old == from_options(RetrievalConfig, {"rerank_runtime": "onnx", "rerank": "r"})
    assert "'rerank_backend' is now 'rerank_runtime'" in caplog.text
    with pytest.raises(IfqaError, match="not both"):
        from_options(RetrievalConfig, {"rerank_backend": "onnx", "rerank_runtime": "torch"}, where="e.yaml")
