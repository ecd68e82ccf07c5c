"""Property: a generated query is refused exactly when it references something outside the
world tables, however the references are spelled, aliased, nested or combined; and every
query the guard lets through runs.

Queries are composed from table references (world tables, or forbidden ones: other
schemas, catalog views, catalog-qualified names, table functions, file scans), each
spelled with random case and quoting and given a random alias, wrapped as counting
subqueries and combined with joins, unions, scalar subqueries, EXISTS and CTEs whose
names may shadow forbidden ones (a CTE the query defines is fine to read).

The oracle is built with the query, independently of the guard: each piece carries the
unqualified table names it leaves unresolved, and a WITH resolves those of its later
bodies that name one of its earlier CTEs, as DuckDB binds them (a CTE's own body, without
RECURSIVE, does not see its own name; an enclosing WITH's names are seen at any depth). A
qualified name, a table function or a file string is never a CTE.

A draw that found a bug is kept as an `@example` below (the `.hypothesis/` database is
not committed, and CI runs derandomized without one: see the README's Development notes).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from hypothesis import HealthCheck, example, given, settings
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
    """A generated query piece and what it reads that it does not define itself.

    `unbound`: the unqualified table names it leaves to an enclosing WITH or the catalog
    (lower case); `pinned`: the world tables it reads by qualified name (`world.artists`);
    `outside`: whether it reads something outside the world that no CTE can stand for (an
    other schema or catalog, a table function, a file string)."""

    sql: str
    unbound: frozenset[str] = frozenset()
    pinned: frozenset[str] = frozenset()
    outside: bool = False

    @property
    def forbidden(self) -> bool:
        """Refused as a whole query: it reads outside the world, or leaves a name no CTE
        binds that is no world table."""
        return self.outside or not self.unbound <= set(WORLD_TABLES)

    @property
    def tables(self) -> frozenset[str]:
        """The world tables an allowed whole query reads."""
        return self.pinned | self.unbound


@st.composite
def spelled(draw: st.DrawFn, name: str) -> str:
    """`name` in random case, sometimes double-quoted (DuckDB compares both ways alike)."""
    cased = "".join(
        char.upper() if char.isalpha() and draw(st.booleans()) else char for char in name
    )
    return f'"{cased}"' if draw(st.booleans()) else cased


@st.composite
def world_ref(draw: st.DrawFn) -> Source:
    name = draw(st.sampled_from(WORLD_TABLES))
    table = draw(spelled(name))
    if draw(st.booleans()):
        return Source(f"{draw(spelled('world'))}.{table}", pinned=frozenset({name}))
    return Source(table, unbound=frozenset({name}))


@st.composite
def forbidden_ref(draw: st.DrawFn) -> Source:
    kind = draw(st.sampled_from(("schema", "unqualified", "catalog", "function", "file")))
    if kind == "schema":
        schema = draw(spelled(draw(st.sampled_from(OTHER_SCHEMAS))))
        table = draw(spelled(draw(st.sampled_from(OTHER_TABLES + WORLD_TABLES))))
        return Source(f"{schema}.{table}", outside=True)
    if kind == "unqualified":  # a CTE of the same name, if one is in scope, is read instead
        name = draw(st.sampled_from(UNQUALIFIED_FORBIDDEN))
        return Source(draw(spelled(name)), unbound=frozenset({name}))
    if kind == "catalog":
        catalog = draw(spelled(draw(st.sampled_from(("world", "system", "temp", "memory")))))
        schema = draw(spelled(draw(st.sampled_from(("main", "world", "truth")))))
        table = draw(spelled(draw(st.sampled_from(WORLD_TABLES))))
        return Source(f"{catalog}.{schema}.{table}", outside=True)
    if kind == "function":
        return Source(draw(st.sampled_from(TABLE_FUNCTIONS)), outside=True)
    scan = draw(st.sampled_from(FILE_SCANS))
    if scan.startswith('"'):  # a quoted identifier: a table name DuckDB scans as a file
        return Source(scan, unbound=frozenset({scan.strip('"').lower()}))
    return Source(scan, outside=True)


def count_of(ref: Source, alias: str) -> Source:
    """One reference as a one-row subquery under `alias` (an alias binds no table name)."""
    return replace(ref, sql=f"SELECT count(*) AS n FROM {ref.sql} AS {alias}")


@st.composite
def counted(draw: st.DrawFn, clean: bool) -> Source:
    """One reference as a one-row subquery, under a random (maybe scary) alias."""
    ref = draw(world_ref() if clean else st.one_of(world_ref(), forbidden_ref()))
    return count_of(ref, draw(spelled(draw(st.sampled_from(NAMES)))))


def combine(kind: str, left: Source, right: Source, cte_names: tuple[str, str]) -> Source:
    unbound = left.unbound | right.unbound
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
        # the second body sees the first CTE; the first does not see itself, and the outer
        # SELECT reads only the two CTEs
        unbound = left.unbound | (right.unbound - {first.lower()})
    return Source(
        sql,
        unbound=unbound,
        pinned=left.pinned | right.pinned,
        outside=left.outside or right.outside,
    )


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


# Issue 25, finding 8: the second CTE reads `world`, which the first CTE defines; the old
# oracle called it a forbidden reference (the catalog `world`) and expected a refusal.
CTE_NAMED_WORLD_READ_LATER = combine(
    "cte",
    count_of(Source("artists", unbound=frozenset({"artists"})), "q"),
    count_of(Source("world", unbound=frozenset({"world"})), "t"),
    ("world", "t"),
)
# ...and the same name read in the first CTE's own body is the catalog's, so refused.
CTE_NAMED_WORLD_READ_IN_ITSELF = combine(
    "cte",
    count_of(Source("world", unbound=frozenset({"world"})), "t"),
    count_of(Source("artists", unbound=frozenset({"artists"})), "q"),
    ("world", "t"),
)
# A CTE named like a world table stands for it in a later body: that body reads no table.
CTE_NAMED_ARTISTS = combine(
    "cte",
    count_of(Source("tracks", unbound=frozenset({"tracks"})), "q"),
    count_of(Source("ARTISTS", unbound=frozenset({"artists"})), "t"),
    ("artists", "q"),
)


def test_the_oracle_resolves_cte_names_as_duckdb_does() -> None:
    assert CTE_NAMED_WORLD_READ_LATER.sql.startswith(
        'WITH "world" AS (SELECT count(*) AS n FROM artists AS q), '
        '"t_2" AS (SELECT count(*) AS n FROM world AS t) '
    )
    assert not CTE_NAMED_WORLD_READ_LATER.forbidden
    assert CTE_NAMED_WORLD_READ_IN_ITSELF.forbidden
    assert not CTE_NAMED_ARTISTS.forbidden and CTE_NAMED_ARTISTS.tables == {"tracks"}


@settings(
    max_examples=200,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(query=composed())
@example(query=CTE_NAMED_WORLD_READ_LATER)
@example(query=CTE_NAMED_WORLD_READ_IN_ITSELF)
@example(query=CTE_NAMED_ARTISTS)
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
    assert set(result.tables) == query.tables, query.sql
