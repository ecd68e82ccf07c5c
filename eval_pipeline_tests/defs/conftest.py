"""A real Dagster instance and DuckDB file with a small world, for the lane and score
assets' tests: model configs copied into the test's own folder, a flaky model for healing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from eval_pipeline.defs.resources import (
    MlflowTracking,
    ModelCallSettings,
    ProjectSettings,
    SimulatedProvider,
    WarehouseResource,
)
from eval_pipeline.paths import CONFIGS_DIR

FLAKY_CONFIG = """\
name: sim-flaky-heal
api: openai_compatible
provider: simulated
model: flaky
base_url_env: EVALP_SIM_OPENAI_URL
api_key_env: EVALP_SIM_API_KEY
max_in_flight: 32
timeout_s: 10
connect_timeout_s: 5
retry: {max_attempts: 1, base_delay_s: 0.01, max_delay_s: 0.01, max_total_s: 1}
"""
NO_FAULTS = {
    "drop": 0,
    "rate_limit": 0,
    "server_error": 0,
    "empty_body": 0,
    "malformed_json": 0,
    "truncated": 0,
}


LANE_MODEL_CONFIGS = (
    "sim-tool-responder-openai.yaml",
    "sim-strong.yaml",
    "sim-small.yaml",
    "sim-judge.yaml",
)


@pytest.fixture
def lane_home(isolated_state: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    return prepare_lane_home(isolated_state, monkeypatch)


def prepare_lane_home(home: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Model configs (and the flaky one) in the test's folder, a small world, and a
    baselines folder of its own."""
    models = home / "models"
    models.mkdir()
    (models / "sim-flaky-heal.yaml").write_text(FLAKY_CONFIG)
    for name in LANE_MODEL_CONFIGS:
        (models / name).write_text((CONFIGS_DIR / "models" / name).read_text())
    lane_env(home, monkeypatch)
    world = home / "world.yaml"
    world.write_text("plugin: label\nseed: 12\nscale: 0.05\n")
    return home


def lane_env(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EVALP_MODELS_DIR", str(home / "models"))
    monkeypatch.setenv("EVALP_BASELINES_DIR", str(home / "baselines"))


def lane_resources(home: Path, faults: dict[str, float] | None = None) -> dict[str, object]:
    """The resources the lane and score assets take, on the test's folder; `faults` plants
    failures in the simulated provider's flaky profile."""
    return {
        "warehouse": WarehouseResource(path=str(home / "warehouse.duckdb")),
        "settings": ProjectSettings(
            world_config_path=str(home / "world.yaml"), fixtures_root=str(home / "fixtures")
        ),
        "sim": SimulatedProvider(profile_options_json=json.dumps({"flaky": faults or NO_FAULTS})),
        "calls": ModelCallSettings(),
        "tracking": MlflowTracking(tracking_uri=f"sqlite:///{home / 'mlflow' / 'mlflow.db'}"),
    }
