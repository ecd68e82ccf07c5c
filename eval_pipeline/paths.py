"""Where things live on disk, relative to the project root or overridden by environment."""

from __future__ import annotations

import os
from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parent.parent
CONFIGS_DIR = PROJECT_ROOT / "configs"
DATA_DIR = PROJECT_ROOT / "data"
FIXTURES_DIR = DATA_DIR / "fixtures"


def var_dir() -> Path:
    """Working state (warehouse, Dagster home, MLflow store): `EVALP_HOME` or `./var`."""
    return Path(os.environ.get("EVALP_HOME", PROJECT_ROOT / "var")).resolve()


def warehouse_path() -> Path:
    """The DuckDB warehouse file: `EVALP_WAREHOUSE` or `<var>/warehouse.duckdb`."""
    override = os.environ.get("EVALP_WAREHOUSE")
    return Path(override).resolve() if override else var_dir() / "warehouse.duckdb"
