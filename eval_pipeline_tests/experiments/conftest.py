"""A project home with a small world on a real Dagster instance, the shipped experiment
specs re-pointed at its fixture set, and an embedded MLflow store."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import dagster as dg
import pytest
import yaml

from eval_pipeline.defs.lane_assets import agent_world_asset
from eval_pipeline.defs.resources import default_resources
from eval_pipeline.defs.world_assets import answer_key_asset, fixtures_asset, world_asset
from eval_pipeline.paths import CONFIGS_DIR
from eval_pipeline.tracking.mlflow_store import TrackingStore
from eval_pipeline_tests.conftest import isolate, point_at
from eval_pipeline_tests.defs.conftest import lane_env, prepare_lane_home
from eval_pipeline_tests.lanes.conftest import agent_db, small_fixture_set, small_warehouse

__all__ = ["agent_db", "small_fixture_set", "small_warehouse"]

SHIPPED = ("lanes-sim-small", "serving-path-sim-strong", "guard-ablation-sim-small")


def project_env(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    point_at(home, monkeypatch)
    lane_env(home, monkeypatch)
    monkeypatch.setenv("EVALP_WORLD_CONFIG", str(home / "world.yaml"))
    monkeypatch.setenv("EVALP_EXPERIMENTS_DIR", str(home / "experiments"))


def write_specs(home: Path, fixture_id: str, seeds: list[int]) -> None:
    """The shipped specs, on this home's fixture set, with fewer seeds and the ablation
    over two of its guards, one it is expected to need and one inert (test time); every
    other field as shipped."""
    folder = home / "experiments"
    folder.mkdir(exist_ok=True)
    for name in SHIPPED:
        spec = yaml.safe_load((CONFIGS_DIR / "experiments" / f"{name}.yaml").read_text())
        spec["fixture_id"] = fixture_id
        for arm in ("reference", "candidate"):
            if arm in spec:
                spec[arm]["seeds"] = seeds
        spec["sample_size"]["seeds"] = len(seeds)
        if "ablate" in spec:
            spec["ablate"] = ["stall_bounce", "iteration_cap"]
        (folder / f"{name}.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, str]]:
    """A home with the world, fixtures and agent database materialized; yields the home
    and its fixture id."""
    with pytest.MonkeyPatch.context() as monkeypatch:
        home = isolate(tmp_path_factory.mktemp("experiments") / "evalp_home", monkeypatch)
        prepare_lane_home(home, monkeypatch)
        anthropic = "sim-strong-anthropic.yaml"
        (home / "models" / anthropic).write_text((CONFIGS_DIR / "models" / anthropic).read_text())
        project_env(home, monkeypatch)
        with dg.DagsterInstance.get() as instance:
            result = dg.materialize(
                [world_asset, answer_key_asset, fixtures_asset, agent_world_asset],
                instance=instance,
                resources=default_resources(),
            )
            assert result.success
        fixture_id = next(
            e.materialization.metadata["fixture_id"].value
            for e in result.get_asset_materialization_events()
            if e.asset_key.to_user_string() == "fixtures"
        )
        write_specs(home, str(fixture_id), [0])
        yield home, str(fixture_id)


@pytest.fixture
def at_project(project: tuple[Path, str], monkeypatch: pytest.MonkeyPatch) -> tuple[Path, str]:
    project_env(project[0], monkeypatch)
    return project


@pytest.fixture
def store(tmp_path: Path) -> TrackingStore:
    """An embedded MLflow store of the test's own."""
    return TrackingStore(
        uri=f"sqlite:///{tmp_path / 'mlflow.db'}", artifact_root=(tmp_path / "art").as_uri()
    )
