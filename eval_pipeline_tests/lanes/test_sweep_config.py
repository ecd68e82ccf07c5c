"""The sweep config: what it accepts and the errors that name the field."""

from __future__ import annotations

from pathlib import Path

import pytest

from eval_pipeline.errors import ConfigError
from eval_pipeline.lanes.sweep_config import load_sweep_config

SWEEP = "name: s\nmodels: [sim-strong, sim-small]\nseeds: [0, 1]\n"


def test_the_shipped_sweep_loads_and_compares_every_pair_by_default() -> None:
    assert load_sweep_config().compare_against is None


def test_a_reference_model_must_be_one_the_sweep_runs(tmp_path: Path) -> None:
    path = tmp_path / "sweep.yaml"
    path.write_text(SWEEP + "compare_against: sim-small\n")
    assert load_sweep_config(path).compare_against == "sim-small"
    path.write_text(SWEEP + "compare_against: sim-hesitant\n")
    with pytest.raises(ConfigError) as raised:
        load_sweep_config(path)
    message = str(raised.value)
    assert str(path) in message
    assert "compare_against: 'sim-hesitant' is not one of the sweep's models" in message
