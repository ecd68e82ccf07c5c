"""The agent's world-only database: the warehouse's `world` tables copied into their own file.

Why a separate file: the product lane's `run_sql` must not be able to read the answer key
even when its guard wrongly lets a query through. The copy holds the world tables and one
bookkeeping table, nothing of `truth`, `meta` or `runs`, so no query on it can reach them.

Layout: ``<out>/world-<fingerprint[:16]>/world.duckdb``. The file is named `world` so that
DuckDB names its catalog `world`; the tables sit in its `main` schema, which makes both
``artists`` and ``world.artists`` resolve, as the tool schema promises. The world's
provenance (meta.world_info of the source) is recorded in ``agent_build.world_source``,
a schema the guard never lets a query name. Large text columns stay DuckDB ENUMs as in the
warehouse (faster to group on than text); they compare with and read back as text.

The copy is keyed by the world fingerprint: building again for the same world returns the
existing file, a new world gets a new folder. Old folders are left in place (a run may
still have one open); they are small (7 MB for the default world).
"""

from __future__ import annotations

import os
import uuid
from pathlib import Path

import duckdb

from eval_pipeline.errors import WarehouseError
from eval_pipeline.lanes.errors import AgentWorldDbError
from eval_pipeline.records import FrozenRecord
from eval_pipeline.warehouse import META_SCHEMA, WORLD_INFO_TABLE, WORLD_SCHEMA

# How every connection in this process opens an agent database. External access off
# refuses file scans, ATTACH, COPY and extension installs; the lock stops SET/RESET from
# undoing any of it; Python replacement scans would otherwise let `FROM name` read a
# Python variable. One configuration for all: DuckDB refuses a second connection to an
# open file with a different one.
AGENT_DB_CONFIG: dict[str, str | bool | int | float] = {
    "enable_external_access": False,
    "autoload_known_extensions": False,
    "autoinstall_known_extensions": False,
    "allow_community_extensions": False,
    "allow_unsigned_extensions": False,
    "python_enable_replacements": False,
    "memory_limit": "1GB",
    "lock_configuration": True,
}

AGENT_DB_NAME = "world.duckdb"
BUILD_SCHEMA = "agent_build"
SOURCE_TABLE = "world_source"
_SOURCE_ALIAS = "source_warehouse"
_TARGET_ALIAS = "agent_world"


class AgentWorldInfo(FrozenRecord):
    """Which world an agent database holds: the source warehouse's meta.world_info row."""

    plugin: str
    generator_version: str
    seed: int
    scale: float
    fingerprint: str


def _quote(identifier: str) -> str:
    """A DuckDB identifier, double-quoted; names come from the catalog, never from users."""
    return '"' + identifier.replace('"', '""') + '"'


def _literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def agent_world_db_path(out: Path, fingerprint: str) -> Path:
    """Where the agent database of the world with `fingerprint` lives under `out`."""
    return out / f"world-{fingerprint[:16]}" / AGENT_DB_NAME


def _read_source_info(conn: duckdb.DuckDBPyConnection, warehouse: Path) -> AgentWorldInfo:
    info_table = f"{_SOURCE_ALIAS}.{META_SCHEMA}.{WORLD_INFO_TABLE}"
    try:
        rows = conn.execute(
            f"SELECT plugin, generator_version, seed, scale, fingerprint FROM {info_table}"
        ).fetchall()
    except duckdb.CatalogException as error:
        raise WarehouseError(
            f"warehouse {warehouse} has no {META_SCHEMA}.{WORLD_INFO_TABLE}; "
            "materialize the world first"
        ) from error
    if len(rows) != 1:
        raise WarehouseError(
            f"warehouse {warehouse}: {META_SCHEMA}.{WORLD_INFO_TABLE} has {len(rows)} rows, "
            "expected 1; re-materialize the world"
        )
    plugin, generator_version, seed, scale, fingerprint = rows[0]
    return AgentWorldInfo(
        plugin=plugin,
        generator_version=generator_version,
        seed=seed,
        scale=scale,
        fingerprint=fingerprint,
    )


def read_agent_world_info(conn: duckdb.DuckDBPyConnection) -> AgentWorldInfo:
    """The provenance recorded in an open agent database (its default catalog)."""
    try:
        rows = conn.execute(
            "SELECT plugin, generator_version, seed, scale, fingerprint "
            f"FROM {BUILD_SCHEMA}.{SOURCE_TABLE}"
        ).fetchall()
    except duckdb.CatalogException as error:
        raise AgentWorldDbError(
            f"not an agent world database (no {BUILD_SCHEMA}.{SOURCE_TABLE}); "
            "build it with build_agent_world_db"
        ) from error
    if len(rows) != 1:
        raise AgentWorldDbError(f"{BUILD_SCHEMA}.{SOURCE_TABLE} has {len(rows)} rows, expected 1")
    plugin, generator_version, seed, scale, fingerprint = rows[0]
    return AgentWorldInfo(
        plugin=plugin,
        generator_version=generator_version,
        seed=seed,
        scale=scale,
        fingerprint=fingerprint,
    )


def open_agent_world_db(path: Path) -> duckdb.DuckDBPyConnection:
    """A read-only, locked-down connection to an agent database (AGENT_DB_CONFIG)."""
    if not path.is_file():
        raise AgentWorldDbError(
            f"agent world database {path} does not exist; build it with build_agent_world_db"
        )
    return duckdb.connect(str(path), read_only=True, config=dict(AGENT_DB_CONFIG))


def _recorded_fingerprint(path: Path) -> str:
    with open_agent_world_db(path) as conn:
        return read_agent_world_info(conn).fingerprint


def _copy_world(conn: duckdb.DuckDBPyConnection, warehouse: Path, info: AgentWorldInfo) -> int:
    """CREATE TABLE AS for every world table, then the provenance row; returns table count."""
    tables = [
        name
        for (name,) in conn.execute(
            "SELECT table_name FROM duckdb_tables() WHERE database_name = ? AND schema_name = ? "
            "ORDER BY table_name",
            [_SOURCE_ALIAS, WORLD_SCHEMA],
        ).fetchall()
    ]
    if not tables:
        raise WarehouseError(
            f"warehouse {warehouse} has no tables in schema {WORLD_SCHEMA!r}; "
            "materialize the world first"
        )
    conn.execute("BEGIN TRANSACTION")
    for name in tables:
        conn.execute(
            f"CREATE TABLE {_TARGET_ALIAS}.main.{_quote(name)} AS "
            f"SELECT * FROM {_SOURCE_ALIAS}.{WORLD_SCHEMA}.{_quote(name)}"
        )
    conn.execute(f"CREATE SCHEMA {_TARGET_ALIAS}.{BUILD_SCHEMA}")
    conn.execute(
        f"CREATE TABLE {_TARGET_ALIAS}.{BUILD_SCHEMA}.{SOURCE_TABLE} ("
        "plugin VARCHAR, generator_version VARCHAR, seed BIGINT, scale DOUBLE, "
        "fingerprint VARCHAR)"
    )
    conn.execute(
        f"INSERT INTO {_TARGET_ALIAS}.{BUILD_SCHEMA}.{SOURCE_TABLE} VALUES (?, ?, ?, ?, ?)",
        [info.plugin, info.generator_version, info.seed, info.scale, info.fingerprint],
    )
    conn.execute("COMMIT")
    return len(tables)


def build_agent_world_db(warehouse: Path, out: Path) -> Path:
    """Copy the warehouse's `world` tables into ``<out>/world-<fp>/world.duckdb``; return it.

    Reads the warehouse read-only (DuckDB refuses that while this same process holds it
    open for writing). Returns the existing copy when one for the same world fingerprint
    is already there; otherwise writes a temporary file beside the target and renames it
    into place, so a reader never sees a half-written database and two builders racing
    on the same world both end with a complete file.
    """
    if not warehouse.exists():
        raise WarehouseError(f"warehouse {warehouse} does not exist; materialize the world first")
    with duckdb.connect() as conn:
        try:
            conn.execute(f"ATTACH {_literal(str(warehouse))} AS {_SOURCE_ALIAS} (READ_ONLY)")
        except duckdb.Error as error:
            hint = ""
            if "already attached" in str(error):
                hint = (
                    "; this process holds it open for writing: build the agent database "
                    "before opening that connection, or close it first"
                )
            raise WarehouseError(
                f"cannot open warehouse {warehouse} read-only: {error}{hint}"
            ) from error
        info = _read_source_info(conn, warehouse)
        target = agent_world_db_path(out, info.fingerprint)
        if target.exists() and _recorded_fingerprint(target) == info.fingerprint:
            return target
        target.parent.mkdir(parents=True, exist_ok=True)
        staging = target.parent / f".{AGENT_DB_NAME}.{os.getpid()}.{uuid.uuid4().hex}.tmp"
        try:
            conn.execute(f"ATTACH {_literal(str(staging))} AS {_TARGET_ALIAS}")
            _copy_world(conn, warehouse, info)
            conn.execute(f"CHECKPOINT {_TARGET_ALIAS}")
            conn.execute(f"DETACH {_TARGET_ALIAS}")
            wal = staging.with_name(staging.name + ".wal")
            if wal.exists():
                raise AgentWorldDbError(
                    f"agent database {staging} kept a write-ahead log after checkpoint"
                )
            os.replace(staging, target)
        finally:
            for leftover in (staging, staging.with_name(staging.name + ".wal")):
                leftover.unlink(missing_ok=True)
    return target
