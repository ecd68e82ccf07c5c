"""The DuckDB warehouse on disk: schemas, whole-table writes and reads.

Schemas are kept apart on purpose: `world` is what agents may query later, `truth` holds
the answer key they must never see, `meta` records what was loaded, and `runs` the call
envelopes. Table names are validated identifiers, never user text pasted into SQL.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path

import duckdb
import polars as pl

from eval_pipeline.errors import WarehouseError

WORLD_SCHEMA = "world"
TRUTH_SCHEMA = "truth"
META_SCHEMA = "meta"
RUNS_SCHEMA = "runs"
WORLD_INFO_TABLE = "world_info"

_IDENTIFIER = re.compile(r"^[a-z_][a-z0-9_]*$")


def _identifier(name: str) -> str:
    if not _IDENTIFIER.match(name):
        raise WarehouseError(f"not a valid warehouse identifier: {name!r}")
    return name


def connect(path: Path, *, read_only: bool = False) -> duckdb.DuckDBPyConnection:
    """Open the warehouse file, creating its folder when writing."""
    if read_only and not path.exists():
        raise WarehouseError(f"warehouse {path} does not exist; materialize the world first")
    if not read_only:
        path.parent.mkdir(parents=True, exist_ok=True)
    return duckdb.connect(str(path), read_only=read_only)


def write_tables(
    conn: duckdb.DuckDBPyConnection, schema: str, tables: Mapping[str, pl.DataFrame]
) -> dict[str, int]:
    """Replace `schema`'s tables with `tables` in one transaction; returns row counts."""
    schema = _identifier(schema)
    counts: dict[str, int] = {}
    conn.execute("BEGIN TRANSACTION")
    try:
        conn.execute(f"CREATE SCHEMA IF NOT EXISTS {schema}")
        for name, frame in sorted(tables.items()):
            table = _identifier(name)
            conn.register("staged_frame", frame.to_arrow())
            try:
                conn.execute(
                    f"CREATE OR REPLACE TABLE {schema}.{table} AS SELECT * FROM staged_frame"
                )
            finally:
                conn.unregister("staged_frame")
            counts[name] = frame.height
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    return counts


def read_table(conn: duckdb.DuckDBPyConnection, schema: str, name: str) -> pl.DataFrame:
    qualified = f"{_identifier(schema)}.{_identifier(name)}"
    try:
        return conn.execute(f"SELECT * FROM {qualified}").pl()
    except duckdb.CatalogException as error:
        raise WarehouseError(f"warehouse has no table {qualified}: {error}") from error


def read_schema(conn: duckdb.DuckDBPyConnection, schema: str) -> dict[str, pl.DataFrame]:
    """Every table of a schema, by name."""
    names = conn.execute(
        "SELECT table_name FROM information_schema.tables WHERE table_schema = ? "
        "ORDER BY table_name",
        [_identifier(schema)],
    ).fetchall()
    if not names:
        raise WarehouseError(f"warehouse schema {schema!r} is empty or missing")
    return {name: read_table(conn, schema, name) for (name,) in names}
