"""The hand list of hostile queries: every one is refused before it runs, for the reason
its group names, in one readable line that leaks nothing from outside `world`."""

from __future__ import annotations

import re
import unicodedata
from pathlib import Path

import duckdb
import pytest

from eval_pipeline.lanes.errors import SqlRefusedError
from eval_pipeline.lanes.sql_tool import AgentSql
from eval_pipeline_tests.lanes.hostile_queries import HOSTILE

CASES = [
    pytest.param(pattern, query, id=f"{category}-{index:02d}")
    for category, (pattern, queries) in HOSTILE.items()
    for index, query in enumerate(queries)
]


@pytest.fixture(scope="module")
def hidden_names(small_warehouse: Path) -> frozenset[str]:
    """Names that exist only outside `world` (schemas, tables, and the columns of truth,
    meta and runs that are not plain English words like `token`): a reason may mention
    one only if the query itself did."""
    with duckdb.connect(str(small_warehouse), read_only=True) as conn:
        rows = conn.execute(
            "SELECT schema_name, table_name, column_name FROM duckdb_columns() "
            "WHERE schema_name IN ('truth', 'meta', 'runs')"
        ).fetchall()
        world_columns = {
            name
            for (name,) in conn.execute(
                "SELECT column_name FROM duckdb_columns() WHERE schema_name = 'world'"
            ).fetchall()
        }
    columns = {column for _, _, column in rows if "_" in column} - world_columns
    return frozenset({schema for schema, _, _ in rows} | {table for _, table, _ in rows} | columns)


def test_the_hand_list_is_large_and_covers_every_trick() -> None:
    queries = [query for _, queries in HOSTILE.values() for query in queries]
    assert len(queries) >= 200
    assert len(set(queries)) == len(queries), "a hostile query is listed twice"
    assert {
        "multiple statements",
        "ddl and dml",
        "admin statements",
        "forbidden schemas",
        "aliases",
        "quoted identifiers",
        "case tricks",
        "catalog-qualified names",
        "ctes",
        "subqueries",
        "set operations",
        "joins and lateral",
        "table functions",
        "file and extension functions",
        "string-literal and path scans",
        "comments hiding statements",
        "unicode and whitespace",
    } <= set(HOSTILE)


@pytest.mark.parametrize(("pattern", "query"), CASES)
def test_hostile_query_is_refused_with_a_readable_reason(
    agent_sql: AgentSql, hidden_names: frozenset[str], pattern: str, query: str
) -> None:
    with pytest.raises(SqlRefusedError) as refused:
        agent_sql.run(query)
    reason = refused.value.reason
    assert re.search(pattern, reason), reason
    assert "\n" not in reason and len(reason) <= 400, reason
    assert not re.search(r"Traceback|sqlglot|<class|Token\(", reason), reason
    invisible = [c for c in reason if not c.isprintable() or unicodedata.category(c) == "Cf"]
    assert not invisible, f"reason hides characters {invisible!r}: {reason!r}"
    leaked = sorted(
        name
        for name in hidden_names
        if re.search(rf"\b{re.escape(name)}\b", reason) and name not in query
    )
    assert not leaked, f"reason names {leaked}, which the query did not: {reason}"


@pytest.mark.parametrize(
    "query",
    [
        "SELECT * FROM duckdb_tables()",
        "SELECT * FROM duckdb_tables",
        "WITH duckdb_tables AS (SELECT * FROM duckdb_tables) SELECT * FROM duckdb_tables",
        "SELECT current_setting('threads')",
        "SELECT * FROM information_schema.tables",
        "SELECT * FROM agent_build.world_source",
        "SELECT * FROM range(3)",
        "SELECT * FROM world.main.artists",
    ],
)
def test_refusals_are_the_guards_doing_not_a_failing_query(agent_sql: AgentSql, query: str) -> None:
    """These run fine on the agent database when the guard is bypassed, so the refusal
    above really means the guard stopped them before DuckDB saw them."""
    assert agent_sql._execute_unguarded(query).row_count >= 1
    with pytest.raises(SqlRefusedError):
        agent_sql.run(query)
