"""The agent world database: exactly the world tables, faithfully, keyed by world
fingerprint, written atomically, rebuilt only when the world changes."""

from __future__ import annotations

import shutil
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import duckdb
import polars as pl
import pytest

from eval_pipeline import world_stages
from eval_pipeline.errors import WarehouseError
from eval_pipeline.lanes.agent_db import (
    AGENT_DB_NAME,
    agent_world_db_path,
    build_agent_world_db,
    open_agent_world_db,
)
from eval_pipeline.lanes.sql_tool import AgentSql
from eval_pipeline.warehouse import connect, write_tables
from eval_pipeline.world import get_world_plugin
from eval_pipeline_tests.lanes.conftest import SMALL_SCALE


def _fingerprint(warehouse: Path) -> str:
    with duckdb.connect(str(warehouse), read_only=True) as conn:
        row = conn.execute("SELECT fingerprint FROM meta.world_info").fetchone()
    assert row is not None
    return str(row[0])


def test_the_copy_holds_the_world_tables_and_nothing_else(
    agent_db: Path, small_warehouse: Path, tmp_path: Path
) -> None:
    # A byte copy, so a plain connection may attach the warehouse beside it even while
    # the session's tool holds the original open with external access off.
    copy = tmp_path / "world" / AGENT_DB_NAME
    copy.parent.mkdir()
    shutil.copy(agent_db, copy)
    with duckdb.connect(str(copy), read_only=True) as conn:
        conn.execute(f"ATTACH '{small_warehouse}' AS source (READ_ONLY)")
        copied = conn.execute(
            "SELECT schema_name, table_name FROM duckdb_tables() "
            "WHERE database_name = 'world' ORDER BY ALL"
        ).fetchall()
        world = conn.execute(
            "SELECT table_name FROM duckdb_tables() "
            "WHERE database_name = 'source' AND schema_name = 'world' ORDER BY 1"
        ).fetchall()
        assert copied == [("agent_build", "world_source")] + [("main", t) for (t,) in world]
        schemas = conn.execute(
            "SELECT DISTINCT schema_name FROM duckdb_schemas() WHERE database_name = 'world'"
        ).fetchall()
        assert {name for (name,) in schemas} == {"main", "agent_build"}
        for (table,) in world:
            copy, source = f"main.{table}", f"source.world.{table}"
            missing = conn.execute(
                f"SELECT count(*) FROM (FROM {source} EXCEPT ALL FROM {copy})"
            ).fetchone()
            extra = conn.execute(
                f"SELECT count(*) FROM (FROM {copy} EXCEPT ALL FROM {source})"
            ).fetchone()
            assert missing == extra == (0,), table


def test_enum_columns_stay_enums_and_compare_as_text(agent_db: Path) -> None:
    with open_agent_world_db(agent_db) as conn:
        types = dict(
            conn.execute(
                "SELECT column_name, data_type FROM duckdb_columns() "
                "WHERE table_name = 'statement_lines'"
            ).fetchall()
        )
        assert types["period"].startswith("ENUM(")
        row = conn.execute(
            "SELECT period, period = '2025-01' FROM statement_lines ORDER BY line_id LIMIT 1"
        ).fetchone()
    assert row == ("2025-01", True)


def test_the_source_world_is_recorded_and_names_the_folder(
    agent_db: Path, small_warehouse: Path
) -> None:
    fingerprint = _fingerprint(small_warehouse)
    assert agent_db == agent_world_db_path(agent_db.parent.parent, fingerprint)
    assert agent_db.name == AGENT_DB_NAME
    with AgentSql(agent_db) as tool:
        assert tool.world.fingerprint == fingerprint
        assert tool.world.scale == SMALL_SCALE


def test_building_again_for_the_same_world_reuses_the_file(
    small_warehouse: Path, tmp_path: Path
) -> None:
    first = build_agent_world_db(small_warehouse, tmp_path)
    stat = first.stat()
    again = build_agent_world_db(small_warehouse, tmp_path)
    assert again == first
    assert (again.stat().st_ino, again.stat().st_mtime_ns) == (stat.st_ino, stat.st_mtime_ns)
    assert sorted(p.name for p in first.parent.iterdir()) == [AGENT_DB_NAME]


def test_a_new_world_gets_a_new_copy(small_warehouse: Path, tmp_path: Path) -> None:
    warehouse = tmp_path / "warehouse.duckdb"
    shutil.copy(small_warehouse, warehouse)
    out = tmp_path / "agent"
    old = build_agent_world_db(warehouse, out)
    other_world = get_world_plugin("label").generate(seed=7, scale=0.03)
    conn = connect(warehouse)
    try:
        world_stages.store_world(conn, other_world)
    finally:
        conn.close()
    new = build_agent_world_db(warehouse, out)
    assert new != old and old.exists()
    with AgentSql(new) as tool:
        assert tool.world.fingerprint == other_world.fingerprint
        lines = tool.run("SELECT count(*) FROM statement_lines").rows[0][0]
    assert lines == other_world.tables["statement_lines"].height


def test_a_stale_file_under_the_right_name_is_replaced(
    small_warehouse: Path, agent_db: Path, tmp_path: Path
) -> None:
    """A copy whose recorded world differs from its folder's key is rebuilt, not trusted."""
    warehouse = tmp_path / "warehouse.duckdb"
    shutil.copy(small_warehouse, warehouse)
    conn = connect(warehouse)
    try:
        world_stages.store_world(conn, get_world_plugin("label").generate(seed=8, scale=0.03))
    finally:
        conn.close()
    out = tmp_path / "agent"
    target = agent_world_db_path(out, _fingerprint(warehouse))
    target.parent.mkdir(parents=True)
    shutil.copy(agent_db, target)  # holds the small world, not this one
    assert build_agent_world_db(warehouse, out) == target
    with AgentSql(target) as tool:
        assert tool.world.fingerprint == _fingerprint(warehouse)


def test_a_new_world_table_is_queryable_without_code_changes(
    small_warehouse: Path, tmp_path: Path
) -> None:
    warehouse = tmp_path / "warehouse.duckdb"
    shutil.copy(small_warehouse, warehouse)
    conn = connect(warehouse)
    try:
        policies = pl.DataFrame({"policy_id": ["POL-1", "POL-2"], "title": ["a", "b"]})
        write_tables(conn, "world", {"policies": policies})
    finally:
        conn.close()
    with AgentSql(build_agent_world_db(warehouse, tmp_path / "agent")) as tool:
        assert "policies" in tool.world_tables
        result = tool.run("SELECT p.title FROM world.policies AS p ORDER BY p.policy_id")
    assert result.rows == (("a",), ("b",))
    assert result.tables == ("policies",)


def test_concurrent_builders_of_one_world_both_end_with_a_complete_file(
    small_warehouse: Path, tmp_path: Path
) -> None:
    with ThreadPoolExecutor(max_workers=3) as pool:
        paths = list(pool.map(lambda _: build_agent_world_db(small_warehouse, tmp_path), range(3)))
    assert len(set(paths)) == 1
    assert sorted(p.name for p in paths[0].parent.iterdir()) == [AGENT_DB_NAME]
    with AgentSql(paths[0]) as tool:
        assert tool.run("SELECT count(*) FROM artists").rows == ((150,),)


def test_a_warehouse_without_a_world_is_refused_by_name(tmp_path: Path) -> None:
    with pytest.raises(WarehouseError, match="does not exist"):
        build_agent_world_db(tmp_path / "nowhere.duckdb", tmp_path / "agent")
    empty = tmp_path / "empty.duckdb"
    connect(empty).close()
    with pytest.raises(WarehouseError, match=r"has no meta\.world_info; materialize the world"):
        build_agent_world_db(empty, tmp_path / "agent")
    assert not (tmp_path / "agent").exists()


def test_building_while_the_tool_has_the_file_open_reuses_it(
    small_warehouse: Path, tmp_path: Path
) -> None:
    """DuckDB refuses a second connection to an open file with another configuration, so
    checking the cached copy must open it exactly as the tool does."""
    path = build_agent_world_db(small_warehouse, tmp_path)
    with AgentSql(path) as tool:
        assert build_agent_world_db(small_warehouse, tmp_path) == path
        assert tool.run("SELECT count(*) FROM artists").rows == ((150,),)


def test_a_warehouse_this_process_is_writing_is_refused_with_a_way_out(
    small_warehouse: Path, tmp_path: Path
) -> None:
    warehouse = tmp_path / "warehouse.duckdb"
    shutil.copy(small_warehouse, warehouse)
    writer = connect(warehouse)
    try:
        with pytest.raises(WarehouseError, match="holds it open for writing"):
            build_agent_world_db(warehouse, tmp_path / "agent")
    finally:
        writer.close()
    assert build_agent_world_db(warehouse, tmp_path / "agent").exists()
