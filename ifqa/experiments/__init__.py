"""Experiments: YAML configs (``config``) run as a list of stages (``stages``, ``runner``) into
results tables (``results``), and the comparisons the notebooks use (``analysis``)."""

from __future__ import annotations

from ifqa.experiments.analysis import compare, load_system_predictions, premise_effect, rescued, side_by_side
from ifqa.experiments.config import load_config, output_dir
from ifqa.experiments.experiment import Experiment
from ifqa.experiments.runner import run_experiment
from ifqa.retrieval.queries import split_premise

__all__ = [
    "Experiment",
    "compare",
    "load_config",
    "load_system_predictions",
    "output_dir",
    "premise_effect",
    "rescued",
    "run_experiment",
    "side_by_side",
    "split_premise",
]
