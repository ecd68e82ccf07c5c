"""Shared test setup: every test runs with its own working state, never the user's ./var."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest


@pytest.fixture(autouse=True)
def isolated_state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """Point EVALP_HOME, the warehouse, fixtures root and DAGSTER_HOME at a temp folder."""
    home = tmp_path / "evalp_home"
    home.mkdir()
    (home / "dagster_home").mkdir()
    monkeypatch.setenv("EVALP_HOME", str(home))
    monkeypatch.setenv("EVALP_WAREHOUSE", str(home / "warehouse.duckdb"))
    monkeypatch.setenv("EVALP_FIXTURES_ROOT", str(home / "fixtures"))
    monkeypatch.setenv("DAGSTER_HOME", str(home / "dagster_home"))
    yield home
