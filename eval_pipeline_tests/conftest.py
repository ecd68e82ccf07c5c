"""Shared test setup: every test runs with its own working state, never the user's ./var."""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

from eval_pipeline import paths
from eval_pipeline.world.base import AnswerKey, GeneratedWorld
from eval_pipeline.world.label import LabelWorld, load_label_config

# Property tests. In CI every draw is derived from the test's own code (derandomize), so a
# CI run never fails on a draw it did not make before; locally each run explores new draws
# and replays the failing ones from `.hypothesis/` first. That folder is not committed: a
# draw that found a bug is kept as an explicit `@example` in its test. Neither profile has
# a deadline or the too-slow health check: how loaded the machine is says nothing about
# the code.
settings.register_profile(
    "ci",
    derandomize=True,
    print_blob=True,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile("dev", deadline=None, suppress_health_check=[HealthCheck.too_slow])


def hypothesis_profile(environ: Mapping[str, str]) -> str:
    """`ci` when the environment says CI (`CI` set, not empty, 0 or false), else `dev`."""
    return "ci" if environ.get("CI", "").strip().lower() not in ("", "0", "false") else "dev"


settings.load_profile(hypothesis_profile(os.environ))


@pytest.fixture(autouse=True)
def isolated_state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """Point EVALP_HOME, the warehouse, fixtures root and DAGSTER_HOME at a temp folder."""
    yield isolate(tmp_path / "evalp_home", monkeypatch)


def isolate(home: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The project's state (EVALP_HOME, warehouse, fixtures, DAGSTER_HOME) in `home`."""
    home.mkdir()
    point_at(home, monkeypatch)
    paths.prepared_dagster_home()
    return home


def point_at(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The environment that makes `home` the project's state (see `isolate`)."""
    monkeypatch.setenv("EVALP_HOME", str(home))
    monkeypatch.setenv("EVALP_WAREHOUSE", str(home / "warehouse.duckdb"))
    monkeypatch.setenv("EVALP_FIXTURES_ROOT", str(home / "fixtures"))
    monkeypatch.setenv("DAGSTER_HOME", str(home / "dagster_home"))
    monkeypatch.delenv("EVALP_MLFLOW_URI", raising=False)


@pytest.fixture(scope="session")
def default_seed() -> int:
    return load_label_config().seed


@pytest.fixture(scope="session")
def label_world(default_seed: int) -> GeneratedWorld:
    """The default label world, generated once per test session (about a second)."""
    return LabelWorld().generate(default_seed, 1.0)


@pytest.fixture(scope="session")
def label_key(label_world: GeneratedWorld) -> AnswerKey:
    return LabelWorld().answer_key(label_world)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Slow tests first, the order otherwise kept: a run that includes them (`.ci/run`)
    starts the long ones at once, beside the fast ones, instead of after them."""
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)
