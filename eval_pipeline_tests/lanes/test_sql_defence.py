"""Defence in depth: with the guard bypassed (the executor's raw path, no sqlglot, no
statement check), the agent database still cannot reach the answer key, the warehouse,
files, extensions or Python variables. Each attack is first shown to work on a plain
DuckDB connection, so a passing test means the agent connection stopped it."""

from __future__ import annotations

from pathlib import Path

import duckdb
import polars as pl
import pytest

from eval_pipeline import paths
from eval_pipeline.lanes.errors import SqlExecutionError
from eval_pipeline.lanes.sql_tool import AgentSql


@pytest.fixture(scope="module")
def fixtures_file() -> Path:
    """A committed fixtures file: it holds every case's expected answer."""
    found = sorted(paths.FIXTURES_DIR.glob("*/cases.jsonl"))
    assert found, f"no committed fixture set under {paths.FIXTURES_DIR}"
    return found[0]


@pytest.mark.parametrize(
    "query",
    [
        "SELECT * FROM truth.artist_ledger",
        "SELECT * FROM truth.canary",
        "SELECT * FROM meta.world_info",
        "SELECT * FROM runs.call_envelopes",
        "SELECT * FROM artist_ledger",
        "SELECT * FROM world.truth.artist_ledger",
    ],
)
def test_answer_key_and_run_tables_do_not_exist_in_the_agent_database(
    agent_sql: AgentSql, small_warehouse: Path, query: str
) -> None:
    with duckdb.connect(str(small_warehouse), read_only=True) as plain:
        on_warehouse = query.replace("world.truth.", "truth.").replace(
            "FROM artist_ledger", "FROM truth.artist_ledger"
        )
        plain.execute(on_warehouse).fetchall()  # the warehouse has it
    with pytest.raises(SqlExecutionError, match="Catalog Error"):
        agent_sql._execute_unguarded(query)


def test_the_catalog_a_bypass_would_see_is_the_world_only(
    agent_sql: AgentSql, agent_db: Path, small_warehouse: Path
) -> None:
    schemas = agent_sql._execute_unguarded(
        "SELECT DISTINCT schema_name FROM duckdb_tables() ORDER BY 1"
    )
    assert schemas.rows == (("agent_build",), ("main",))
    databases = agent_sql._execute_unguarded(
        "SELECT database_name, path FROM duckdb_databases() ORDER BY 1"
    )
    assert databases.rows == (("system", None), ("temp", None), ("world", str(agent_db)))
    assert str(small_warehouse) not in str(databases.rows)


def test_a_string_literal_scan_of_the_fixtures_fails(
    agent_sql: AgentSql, fixtures_file: Path
) -> None:
    scan = f"SELECT count(*) FROM '{fixtures_file}'"
    with duckdb.connect() as plain:
        row = plain.execute(scan).fetchone()
        assert row is not None and row[0] > 0  # a plain connection reads the answers
    with pytest.raises(SqlExecutionError, match="Permission Error"):
        agent_sql._execute_unguarded(scan)
    for reader in ("read_text", "read_json_auto", "read_csv"):
        with pytest.raises(SqlExecutionError, match="Permission Error"):
            agent_sql._execute_unguarded(f"SELECT * FROM {reader}('{fixtures_file}')")


def test_attaching_the_warehouse_fails(
    agent_sql: AgentSql, small_warehouse: Path, tmp_path: Path
) -> None:
    attach = f"ATTACH '{small_warehouse}' AS stolen (READ_ONLY)"
    with duckdb.connect() as plain:
        plain.execute(attach)
        assert plain.execute("SELECT count(*) FROM stolen.truth.artist_ledger").fetchone()
    with pytest.raises(SqlExecutionError, match="Permission Error"):
        agent_sql._execute_unguarded(attach)
    with pytest.raises(SqlExecutionError):
        agent_sql._execute_unguarded(f"ATTACH '{tmp_path / 'new.duckdb'}' AS fresh")


@pytest.mark.parametrize(
    ("query", "error"),
    [
        ("SET enable_external_access = true", "locked"),
        ("RESET enable_external_access", "locked"),
        ("SET lock_configuration = false", "locked"),
        ("SET python_enable_replacements = true", "locked"),
        ("INSTALL httpfs", "Permission Error"),
        ("LOAD httpfs", "Permission Error"),
        ("CREATE TABLE leak AS SELECT 1 AS x", "read-only"),
        ("DROP TABLE artists", "read-only"),
        ("UPDATE artists SET name = 'x'", "read-only"),
        ("EXPORT DATABASE 'dump'", "Permission Error"),
        ("SELECT getenv('HOME')", "getenv"),
    ],
)
def test_settings_extensions_and_writes_are_refused_by_the_connection(
    agent_sql: AgentSql, query: str, error: str
) -> None:
    with pytest.raises(SqlExecutionError, match=error):
        agent_sql._execute_unguarded(query)


def test_copy_to_a_file_writes_nothing(agent_sql: AgentSql, tmp_path: Path) -> None:
    target = tmp_path / "artists.csv"
    with pytest.raises(SqlExecutionError, match="Permission Error"):
        agent_sql._execute_unguarded(f"COPY artists TO '{target}'")
    assert not target.exists()


def test_python_variables_are_not_tables(agent_sql: AgentSql) -> None:
    """DuckDB's Python replacement scan would read a variable named in FROM."""
    secret_frame = pl.DataFrame({"token": ["planted-secret"]})
    assert duckdb.connect().execute("SELECT * FROM secret_frame").fetchall() == [
        ("planted-secret",)
    ]
    assert secret_frame.height == 1
    with pytest.raises(SqlExecutionError, match="Catalog Error"):
        agent_sql._execute_unguarded("SELECT * FROM secret_frame")


def test_temporary_objects_do_not_outlive_a_call(agent_sql: AgentSql) -> None:
    """A read-only database still allows temp tables; each call's cursor drops them."""
    agent_sql._execute_unguarded("CREATE TEMP TABLE scratch AS SELECT 1 AS x")
    with pytest.raises(SqlExecutionError, match="Catalog Error"):
        agent_sql._execute_unguarded("SELECT * FROM scratch")


def test_a_smuggled_second_statement_cannot_reach_truth(agent_sql: AgentSql) -> None:
    with pytest.raises(SqlExecutionError, match="Catalog Error"):
        agent_sql._execute_unguarded("SELECT 1; SELECT * FROM truth.artist_ledger")
