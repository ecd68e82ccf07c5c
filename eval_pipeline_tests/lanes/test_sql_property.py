"""Property: a generated query is refused exactly when it references something outside the
world tables, however the references are spelled, aliased, nested or combined; and every
query the guard lets through runs.

Queries are composed from table references (world tables, or forbidden ones: other
schemas, catalog views, catalog-qualified names, table functions, file scans), each
spelled with random case and quoting and given a random alias, wrapped as counting
subqueries and combined with joins, unions, scalar subqueries, EXISTS and CTEs whose
names may shadow forbidden ones (a CTE the query defines is fine to read).
"""

from __future__ import annotations

from dataclasses import dataclass

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from eval_pipeline.lanes.errors import SqlRefusedError
from eval_pipeline.lanes.sql_tool import AgentSql

WORLD_TABLES = (
    "artists",
    "contracts",
    "contract_clauses",
    "releases",
    "tracks",
    "statement_lines",
    "fx_rates",
)
OTHER_SCHEMAS = (
    "truth",
    "meta",
    "runs",
    "main",
    "information_schema",
    "pg_catalog",
    "agent_build",
    "temp",
    "system",
    "worlds",
)
OTHER_TABLES = ("artist_ledger", "world_info", "call_envelopes", "tables", "canary", "artists")
UNQUALIFIED_FORBIDDEN = (
    "duckdb_tables",
    "duckdb_settings",
    "pg_class",
    "world_source",
    "artist_ledger",
    "canary",
    "sqlite_master",
    "world",
)
TABLE_FUNCTIONS = (
    "read_csv('cases.csv')",
    "duckdb_tables()",
    "range(3)",
    "glob('*')",
    "read_text('x')",
    "query_table('truth.canary')",
)
FILE_SCANS = ("'cases.jsonl'", "'/etc/passwd'", '"x.parquet"')
NAMES = ("t", "q", "truth", "meta", "artists", "world", "duckdb_tables", "runs")


@dataclass(frozen=True)
class Source:
    sql: str
    forbidden: bool


@st.composite
def spelled(draw: st.DrawFn, name: str) -> str:
    """`name` in random case, sometimes double-quoted (DuckDB compares both ways alike)."""
    cased = "".join(
        char.upper() if char.isalpha() and draw(st.booleans()) else char for char in name
    )
    return f'"{cased}"' if draw(st.booleans()) else cased


@st.composite
def world_ref(draw: st.DrawFn) -> Source:
    table = draw(spelled(draw(st.sampled_from(WORLD_TABLES))))
    if draw(st.booleans()):
        table = f"{draw(spelled('world'))}.{table}"
    return Source(table, forbidden=False)


@st.composite
def forbidden_ref(draw: st.DrawFn) -> Source:
    kind = draw(st.sampled_from(("schema", "unqualified", "catalog", "function", "file")))
    if kind == "schema":
        schema = draw(spelled(draw(st.sampled_from(OTHER_SCHEMAS))))
        table = draw(spelled(draw(st.sampled_from(OTHER_TABLES + WORLD_TABLES))))
        return Source(f"{schema}.{table}", forbidden=True)
    if kind == "unqualified":
        return Source(draw(spelled(draw(st.sampled_from(UNQUALIFIED_FORBIDDEN)))), True)
    if kind == "catalog":
        catalog = draw(spelled(draw(st.sampled_from(("world", "system", "temp", "memory")))))
        schema = draw(spelled(draw(st.sampled_from(("main", "world", "truth")))))
        table = draw(spelled(draw(st.sampled_from(WORLD_TABLES))))
        return Source(f"{catalog}.{schema}.{table}", forbidden=True)
    if kind == "function":
        return Source(draw(st.sampled_from(TABLE_FUNCTIONS)), forbidden=True)
    return Source(draw(st.sampled_from(FILE_SCANS)), forbidden=True)


@st.composite
def counted(draw: st.DrawFn, clean: bool) -> Source:
    """One reference as a one-row subquery, under a random (maybe scary) alias."""
    ref = draw(world_ref() if clean else st.one_of(world_ref(), forbidden_ref()))
    alias = draw(spelled(draw(st.sampled_from(NAMES))))
    return Source(f"SELECT count(*) AS n FROM {ref.sql} AS {alias}", ref.forbidden)


def combine(kind: str, left: Source, right: Source, cte_names: tuple[str, str]) -> Source:
    forbidden = left.forbidden or right.forbidden
    if kind == "join":
        sql = f"SELECT a.n + b.n AS n FROM ({left.sql}) AS a CROSS JOIN ({right.sql}) AS b"
    elif kind == "union":
        sql = f"SELECT sum(n) AS n FROM (({left.sql}) UNION ALL ({right.sql})) AS u"
    elif kind == "scalar":
        sql = f"SELECT ({left.sql}) + ({right.sql}) AS n"
    elif kind == "exists":
        sql = f"SELECT n FROM ({left.sql}) AS e WHERE EXISTS ({right.sql}) OR true"
    elif kind == "in":
        sql = f"SELECT n FROM ({left.sql}) AS e WHERE n IN ({right.sql}) OR true"
    else:  # cte: the names may shadow forbidden ones; reading a CTE the query defines is fine
        first, second = cte_names
        sql = (
            f'WITH "{first}" AS ({left.sql}), "{second}_2" AS ({right.sql}) '
            f'SELECT x.n + y.n AS n FROM "{first}" AS x, "{second}_2" AS y'
        )
    return Source(sql, forbidden)


@st.composite
def composed(draw: st.DrawFn) -> Source:
    clean = draw(st.booleans())  # half the queries use world tables only, so both sides
    source = draw(counted(clean))  # of the property get exercised
    for _ in range(draw(st.integers(min_value=0, max_value=3))):
        kind = draw(st.sampled_from(("join", "union", "scalar", "exists", "in", "cte")))
        other = draw(counted(clean))
        names = (draw(st.sampled_from(NAMES)), draw(st.sampled_from(NAMES)))
        left, right = (source, other) if draw(st.booleans()) else (other, source)
        source = combine(kind, left, right, names)
    return source


@settings(
    max_examples=200,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(query=composed())
def test_refused_exactly_when_something_outside_world_is_referenced(
    agent_sql: AgentSql, query: Source
) -> None:
    if query.forbidden:
        try:
            agent_sql.run(query.sql)
        except SqlRefusedError:
            return
        raise AssertionError(f"not refused: {query.sql}")
    result = agent_sql.run(query.sql)  # allowed queries must also run
    assert result.row_count >= 1
    assert set(result.tables) <= set(WORLD_TABLES)
