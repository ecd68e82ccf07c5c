"""`run_sql` on the agent world database: analytic queries work and agree with the
warehouse, results are bounded and JSON-safe, failures are typed and readable, a runaway
query stops at its deadline, and the tool is safe to share between threads."""

from __future__ import annotations

import asyncio
import json
import re
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import duckdb
import pytest

from eval_pipeline.lanes.errors import (
    AgentWorldDbError,
    SqlExecutionError,
    SqlTimeoutError,
)
from eval_pipeline.lanes.sql_tool import ROW_LIMIT, AgentSql, SqlResult
from eval_pipeline.lanes.sql_worker import QueryFailedError, one_select
from eval_pipeline.world.label.tools import LABEL_TOOLS, RUN_SQL

RUNAWAY = "SELECT sum(a.units * b.units) FROM statement_lines AS a, statement_lines AS b"
ENDLESS = "WITH RECURSIVE t AS (SELECT 1 AS n UNION ALL SELECT n + 1 FROM t) SELECT count(*) FROM t"

# Typical agent queries over the world, each with the same query on the warehouse.
ANALYTIC = {
    "three-table join": (
        "SELECT a.name, count(*) AS tracks FROM artists AS a "
        "JOIN releases AS r ON r.artist_id = a.artist_id "
        "JOIN tracks AS t ON t.release_id = r.release_id "
        "GROUP BY a.name ORDER BY tracks DESC, a.name LIMIT 10"
    ),
    "cte and window": (
        "WITH per_period AS (SELECT period, sum(units) AS units FROM world.statement_lines "
        "GROUP BY period) SELECT period, units, sum(units) OVER (ORDER BY period) AS running "
        "FROM per_period ORDER BY period"
    ),
    "group by with filter": (
        "SELECT distributor_id, channel, count(*) AS lines, sum(amount_minor) AS amount "
        "FROM statement_lines WHERE period = '2025-03' GROUP BY ALL ORDER BY ALL"
    ),
    "set operation": (
        "SELECT artist_id FROM contracts WHERE kind = 'amendment' "
        "INTERSECT SELECT artist_id FROM artists WHERE cross_collateralized ORDER BY 1"
    ),
    "recursive amendment chain": (
        "WITH RECURSIVE chain AS (SELECT contract_id, amends_contract_id, 0 AS depth "
        "FROM contracts WHERE amends_contract_id IS NULL UNION ALL "
        "SELECT c.contract_id, c.amends_contract_id, chain.depth + 1 FROM contracts AS c "
        "JOIN chain ON c.amends_contract_id = chain.contract_id) "
        "SELECT depth, count(*) AS n FROM chain GROUP BY depth ORDER BY depth"
    ),
    "qualify and from-first": (
        "FROM contract_rates SELECT contract_id, channel, rate_ppm "
        "QUALIFY row_number() OVER (PARTITION BY channel ORDER BY rate_ppm DESC, "
        "contract_id) = 1 ORDER BY channel"
    ),
    "correlated subquery": (
        "SELECT r.release_id, (SELECT count(*) FROM tracks AS t "
        "WHERE t.release_id = r.release_id) AS n FROM releases AS r ORDER BY r.release_id "
        "LIMIT 5"
    ),
    # Found by the simulated agents: a join on two conditions was refused as a table
    # function, because the AND under the JOIN was taken for one.
    "join on two conditions": (
        "SELECT l.currency, count(*) AS n FROM statement_lines AS l JOIN fx_rates AS fx "
        "ON fx.period = l.period AND fx.currency = l.currency OR fx.usd_per_unit_micro < 0 "
        "GROUP BY l.currency ORDER BY l.currency"
    ),
    "quoted and mixed case": (
        'SELECT "ARTIST_ID", "Name" FROM "World"."Artists" WHERE "Country" = \'DE\' '
        "ORDER BY 1 LIMIT 3"
    ),
}


def _warehouse_rows(warehouse: Path, query: str) -> list[tuple[object, ...]]:
    """The same query on the warehouse's world schema: the independent answer."""
    with duckdb.connect(str(warehouse), read_only=True) as conn:
        conn.execute("SET search_path = 'world'")
        return conn.execute(query.replace("world.", "").replace('"World".', "")).fetchall()


@pytest.mark.parametrize("name", sorted(ANALYTIC))
def test_analytic_queries_match_the_warehouse(
    agent_sql: AgentSql, small_warehouse: Path, name: str
) -> None:
    query = ANALYTIC[name]
    result = agent_sql.run(query)
    expected = _warehouse_rows(small_warehouse, query)
    assert result.row_count == len(expected) > 0
    assert [list(row) for row in result.rows] == [
        [str(v) if not isinstance(v, str | int | bool) and v is not None else v for v in row]
        for row in expected
    ]
    assert not result.truncated
    assert result.tables and set(result.tables) <= set(agent_sql.world_tables)


def test_the_tool_schema_promises_what_the_tool_does(agent_sql: AgentSql) -> None:
    """The model reads the schema's description: its table list and row limit must be
    the ones run_sql enforces."""
    (spec,) = [tool for tool in LABEL_TOOLS if tool.name == RUN_SQL]
    listed = re.search(r"\(([a-z_, ]+)\)", spec.description)
    assert listed is not None
    assert tuple(sorted(listed.group(1).split(", "))) == agent_sql.world_tables
    assert f"at most {ROW_LIMIT} rows" in spec.description


def test_result_records_the_world_tables_read(agent_sql: AgentSql) -> None:
    result = agent_sql.run(ANALYTIC["three-table join"])
    assert result.tables == ("artists", "releases", "tracks")
    assert result.columns == ("name", "tracks")
    assert result.column_types == ("VARCHAR", "BIGINT")


def test_row_limit_truncates_and_says_so(agent_sql: AgentSql) -> None:
    everything = agent_sql.run("SELECT line_id FROM statement_lines ORDER BY line_id")
    assert everything.row_count == ROW_LIMIT == len(everything.rows)
    assert everything.truncated and everything.row_limit == ROW_LIMIT
    assert everything.rows[0] == (1,)
    exactly = agent_sql.run(f"SELECT * FROM tracks LIMIT {ROW_LIMIT}")
    assert exactly.row_count == ROW_LIMIT and not exactly.truncated
    one_more = agent_sql.run(f"SELECT * FROM tracks LIMIT {ROW_LIMIT + 1}")
    assert one_more.row_count == ROW_LIMIT and one_more.truncated


def test_a_smaller_row_limit_is_honoured(agent_db: Path) -> None:
    with AgentSql(agent_db, row_limit=3) as tool:
        result = tool.run("SELECT artist_id FROM artists ORDER BY artist_id")
    assert result.rows == (("ART-0001",), ("ART-0002",), ("ART-0003",))
    assert result.truncated


def test_values_are_json_safe_and_exact(agent_sql: AgentSql) -> None:
    result = agent_sql.run(
        "SELECT DATE '2025-03-31' AS d, TIMESTAMP '2025-03-31 12:00:01' AS ts, "
        "TIME '08:30:00' AS tm, 1234.50::DECIMAL(12, 2) AS money, 0.1::DOUBLE AS f, "
        "'nan'::DOUBLE AS nan, 'inf'::DOUBLE AS inf, INTERVAL 3 DAY AS iv, "
        "'\\x01\\xff'::BLOB AS b, '4ad84d2a-3c2a-4d4b-9b7f-0a1f6f1c2d3e'::UUID AS u, "
        "[DATE '2025-01-01'] AS l, {'amount': 1.5::DECIMAL(4, 2)} AS s, "
        "MAP {'k': 2} AS m, NULL AS nothing, true AS yes, 12345678901234567890::HUGEINT AS big"
    )
    row = dict(zip(result.columns, result.rows[0], strict=True))
    assert row["d"] == "2025-03-31"
    assert row["ts"] == "2025-03-31T12:00:01"
    assert row["tm"] == "08:30:00"
    assert row["money"] == "1234.50"
    assert row["f"] == 0.1
    assert row["nan"] == "nan" and row["inf"] == "inf"
    assert row["iv"] == "3 days, 0:00:00"
    assert row["b"] == "01ff"
    assert row["u"] == "4ad84d2a-3c2a-4d4b-9b7f-0a1f6f1c2d3e"
    assert row["l"] == ["2025-01-01"]
    assert row["s"] == {"amount": "1.50"}
    assert row["m"] == {"k": 2}
    assert row["nothing"] is None and row["yes"] is True
    assert row["big"] == 12345678901234567890
    json.dumps(result.model_dump(), allow_nan=False)
    assert SqlResult.model_validate(result.model_dump()) == result


def test_enum_columns_read_as_text(agent_sql: AgentSql) -> None:
    result = agent_sql.run(
        "SELECT period, channel, isrc, period || '/' || channel AS joined "
        "FROM statement_lines WHERE period LIKE '2025-0%' ORDER BY line_id LIMIT 1"
    )
    assert result.column_types == ("VARCHAR", "VARCHAR", "VARCHAR", "VARCHAR")
    period, channel, _, joined = result.rows[0]
    assert isinstance(period, str) and period.startswith("2025-0")
    assert joined == f"{period}/{channel}"
    listed = agent_sql.run("SELECT list(DISTINCT channel) AS channels FROM statement_lines")
    assert listed.column_types == ("VARCHAR[]",)


def test_execution_errors_are_typed_and_readable(agent_sql: AgentSql) -> None:
    with pytest.raises(SqlExecutionError) as bad_column:
        agent_sql.run("SELECT nosuch FROM artists")
    assert 'Referenced column "nosuch" not found' in bad_column.value.reason
    with pytest.raises(SqlExecutionError) as bad_cast:
        agent_sql.run("SELECT CAST(name AS INTEGER) FROM artists")
    assert "Conversion Error" in bad_cast.value.reason


def test_an_enum_in_an_error_is_named_as_text_not_listed(agent_sql: AgentSql) -> None:
    """DuckDB spells an ENUM type with all its values (2,400 ISRCs at full scale)."""
    with pytest.raises(SqlExecutionError) as error:
        agent_sql.run("SELECT sum(isrc) FROM statement_lines")
    assert "sum(VARCHAR)" in error.value.reason
    assert "ENUM(" not in error.value.reason and len(error.value.reason) <= 800


def test_duckdb_syntax_it_rejects_is_an_execution_error(agent_sql: AgentSql) -> None:
    """sqlglot reads the pipe syntax; DuckDB 1.5 does not: the agent gets DuckDB's words."""
    with pytest.raises(SqlExecutionError, match="Parser Error"):
        agent_sql.run("FROM artists |> SELECT name")


def test_duckdb_must_also_read_exactly_one_select(agent_sql: AgentSql) -> None:
    """The second wall: DuckDB's own parser decides what runs, whatever sqlglot saw."""
    cursor = duckdb.connect()
    try:
        assert one_select(cursor, "SELECT 42").query == "SELECT 42"
        with pytest.raises(QueryFailedError, match="DuckDB reads the query as 2") as two:
            one_select(cursor, "SELECT 1; SELECT 2")
        with pytest.raises(QueryFailedError, match="DuckDB reads the query as EXPLAIN") as other:
            one_select(cursor, "EXPLAIN SELECT 1")
        assert two.value.kind == other.value.kind == "refused"
    finally:
        cursor.close()


def test_nested_comments_cannot_smuggle_a_statement(agent_sql: AgentSql) -> None:
    """Both parsers nest block comments, so this is one harmless SELECT for both."""
    result = agent_sql.run("SELECT 1 AS one /* /* */ ; SELECT * FROM truth.canary; */")
    assert result.rows == ((1,),)


@pytest.mark.parametrize("query", [RUNAWAY, ENDLESS], ids=["cross join", "endless recursion"])
def test_a_runaway_query_stops_at_the_deadline_and_the_tool_stays_usable(
    agent_db: Path, query: str
) -> None:
    with AgentSql(agent_db, timeout_s=0.3) as tool:
        with pytest.raises(SqlTimeoutError, match=r"longer than 0.3 s and was stopped"):
            tool.run(query)
        assert tool.run("SELECT count(*) FROM artists").rows == ((150,),)
        with pytest.raises(SqlTimeoutError):
            tool.run(query)
        assert tool.run("SELECT count(*) FROM tracks").row_count == 1


def test_a_timeout_in_one_thread_leaves_the_others_alone(agent_db: Path) -> None:
    with AgentSql(agent_db, timeout_s=0.5) as tool, ThreadPoolExecutor(max_workers=2) as pool:
        runaway = pool.submit(tool.run, RUNAWAY)
        quick = [tool.run("SELECT count(*) FROM artists").rows for _ in range(20)]
        with pytest.raises(SqlTimeoutError):
            runaway.result()
    assert quick == [((150,),)] * 20


def test_concurrent_calls_from_threads_and_asyncio_agree_with_serial(agent_sql: AgentSql) -> None:
    queries = [ANALYTIC[name] for name in sorted(ANALYTIC)] * 3
    serial = [agent_sql.run(query).rows for query in queries]
    with ThreadPoolExecutor(max_workers=6) as pool:
        threaded = list(pool.map(lambda query: agent_sql.run(query).rows, queries))

    async def lane() -> list[SqlResult]:
        return await asyncio.gather(*(asyncio.to_thread(agent_sql.run, q) for q in queries))

    from_asyncio = [result.rows for result in asyncio.run(lane())]
    assert threaded == serial == from_asyncio


def test_the_tool_reports_its_world(agent_sql: AgentSql, small_warehouse: Path) -> None:
    with duckdb.connect(str(small_warehouse), read_only=True) as conn:
        fingerprint = conn.execute("SELECT fingerprint FROM meta.world_info").fetchone()
        world_tables = conn.execute(
            "SELECT table_name FROM duckdb_tables() WHERE schema_name = 'world' ORDER BY 1"
        ).fetchall()
    assert fingerprint is not None and agent_sql.world.fingerprint == fingerprint[0]
    assert agent_sql.world_tables == tuple(name for (name,) in world_tables)


def test_opening_something_that_is_not_an_agent_database_fails_clearly(
    tmp_path: Path, small_warehouse: Path
) -> None:
    with pytest.raises(AgentWorldDbError, match="does not exist"):
        AgentSql(tmp_path / "missing.duckdb")
    with pytest.raises(AgentWorldDbError, match="not an agent world database"):
        AgentSql(small_warehouse)


def test_a_closed_tool_says_so(agent_db: Path) -> None:
    tool = AgentSql(agent_db)
    tool.close()
    tool.close()
    with pytest.raises(AgentWorldDbError, match=r"after close\(\)"):
        tool.run("SELECT 1")


def test_closing_stops_the_watchdog_thread(agent_db: Path) -> None:
    before = {thread.ident for thread in threading.enumerate()}
    with AgentSql(agent_db) as tool:
        tool.run("SELECT 1")
    after = {t.ident for t in threading.enumerate() if t.name == "run_sql-watchdog"}
    assert not (after - before)
