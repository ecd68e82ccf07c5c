"""Shared test setup: every test runs with its own working state, never the user's ./var."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from eval_pipeline import paths
from eval_pipeline.world.base import AnswerKey, GeneratedWorld
from eval_pipeline.world.label import LabelWorld, load_label_config


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
    monkeypatch.setenv("EVALP_README", str(home / "README.md"))  # absent: a demo skips it
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
