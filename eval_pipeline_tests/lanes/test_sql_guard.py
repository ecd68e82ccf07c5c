"""The SQL guard on its own, and the exact words of its refusals.

The other `run_sql` tests check that a hostile query is refused for the right kind of
reason (a pattern per group); the mutation run of the guard (issue 13) showed that no test
read a reason whole: the name it quotes and how it is cut, the hint for a non-ASCII name,
the list of world tables, the statement kinds it names, the parser's position and
complaint. Nor did any test build a guard itself (its deny list, its empty-table check) or
send the DuckDB-only syntax a generic SQL parser would refuse.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from hypothesis import given
from hypothesis import strategies as st
from sqlglot.errors import ParseError

from eval_pipeline.lanes.errors import SqlRefusedError
from eval_pipeline.lanes.sql_guard import SqlGuard, _parse_failure, _shown
from eval_pipeline.lanes.sql_tool import AgentSql


def world_guard() -> SqlGuard:
    """A guard over two world tables, built in each test, not at import: the mutation
    run forks its test processes after import, and a guard built then would not be built
    by the code under test."""
    return SqlGuard(["Tracks", "artists"])


TABLES = "artists, tracks"
WORLD = f"world tables are: {TABLES}"
ONLY = "only one SELECT over the world tables is allowed: found "


def refusal(query: str, guard: SqlGuard | None = None) -> str:
    with pytest.raises(SqlRefusedError) as refused:
        (guard or world_guard()).check(query)
    return refused.value.reason


@pytest.mark.parametrize(
    ("query", "reason"),
    [
        (
            "SELECT * FROM truth.artist_ledger",
            f"table truth.artist_ledger is not a world table; {WORLD}",
        ),
        ("SELECT * FROM canary", f"table canary is not a world table; {WORLD}"),
        (
            "SELECT * FROM té",
            f"table té is not a world table (the name has non-ASCII characters); {WORLD}",
        ),
        (
            'SELECT * FROM "tr\u200buth".artists',
            "table tr\\u200buth.artists is not a world table (the name has non-ASCII "
            f"characters); {WORLD}",
        ),
        # whitespace runs are one space, control characters are spelled out
        ('SELECT * FROM "my\n\t  table"', f"table my table is not a world table; {WORLD}"),
        ('SELECT * FROM "x\x01y"', f"table x\\u0001y is not a world table; {WORLD}"),
        ("SELECT 1; 'x'", "only one statement is allowed: found 2 (SELECT, the string 'x')"),
        ("select 1; drop table x", "only one statement is allowed: found 2 (SELECT, DROP)"),
        ("checkpoint", f"{ONLY}CHECKPOINT"),
        ("SELECT 1 INTO leak", f"{ONLY}SELECT INTO"),
        ("WITH t AS (SELECT 1) insert INTO artists SELECT * FROM t", f"{ONLY}INSERT"),
        ("values (1)", f"{ONLY}VALUES"),
        (
            "SELECT * FROM generate_series(1, 3)",
            "table functions are not allowed (generate_series); select from the world tables: "
            + TABLES,
        ),
        (
            "SELECT * FROM Scan_Things('x.csv')",  # a function sqlglot does not know, as written
            "table functions are not allowed (Scan_Things); select from the world tables: "
            + TABLES,
        ),
        (
            "SELECT * FROM world.main.artists",
            "catalog-qualified name world.main.artists is not allowed; write <table> or "
            f"world.<table>; {WORLD}",
        ),
        (
            "SELECT getenv('HOME')",
            "function getenv() is not allowed: run_sql reads the world tables only (no "
            "settings, files, catalog or environment)",
        ),
        (
            "SELECT * FROM 'cases.jsonl'",
            f"file scans are not allowed ('cases.jsonl'); select from the world tables: {TABLES}",
        ),
        ("SELECT (1", "the query could not be parsed at line 1, column 9 near '1': Expecting )"),
        # sqlglot's complaint is left out when it spells an internal class
        ("SELECT 1\n+\n(", "the query could not be parsed at line 3, column 1 near '('"),
    ],
)
def test_a_refusal_says_exactly_what_was_refused_and_what_is_allowed(
    query: str, reason: str
) -> None:
    assert refusal(query) == reason


LIMITS: list[tuple[int, Callable[[str], str], Callable[[str, str], str]]] = [
    # (the limit, a query quoting a text, the reason quoting it as shown)
    (60, lambda t: f"SELECT * FROM {t}", lambda s, q: f"table {s} is not a world table; {WORLD}"),
    (
        30,
        lambda t: f"SELECT 1; {t}",
        lambda s, q: f"only one statement is allowed: found 2 (SELECT, {s})",
    ),
    (
        30,
        lambda t: f"SELECT 1; '{t}'",
        lambda s, q: f"only one statement is allowed: found 2 (SELECT, the string '{s}')",
    ),
    (
        40,
        lambda t: f"SELECT ({t}",
        lambda s, q: (
            f"the query could not be parsed at line 1, column {len(q)} near '{s}': Expecting )"
        ),
    ),
    (
        40,
        lambda t: f"SELECT * FROM {t}('x')",
        lambda s, q: (
            f"table functions are not allowed ({s}); select from the world tables: {TABLES}"
        ),
    ),
]


@pytest.mark.parametrize(("limit", "query_of", "reason_of"), LIMITS)
def test_quoted_text_is_cut_at_its_limit_with_an_ellipsis(
    limit: int, query_of: Callable[[str], str], reason_of: Callable[[str, str], str]
) -> None:
    for length in (limit - 1, limit, limit + 1, limit + 20):
        text = "B" * length
        shown = text if length <= limit else "B" * (limit - 1) + "…"
        query = query_of(text)
        assert refusal(query) == reason_of(shown, query), length


@given(st.text(alphabet=st.sampled_from("ab \t\n\x01\u200bé…")), st.integers(2, 80))
def test_shown_text_is_one_line_within_its_limit(text: str, limit: int) -> None:
    shown = _shown(text, limit)
    flat = " ".join(text.split()).replace("\x01", "\\u0001").replace("\u200b", "\\u200b")
    assert shown == (flat if len(flat) <= limit else flat[: limit - 1] + "…")
    assert len(shown) <= limit and "\n" not in shown and "\t" not in shown


def test_a_parse_error_without_details_still_reads_as_one() -> None:
    # sqlglot raises some parse errors with no line, position or description
    assert _parse_failure(ParseError("failed")) == "the query could not be parsed"
    bare = ParseError.new("failed", description=None, line=None, col=None, highlight=None)
    assert _parse_failure(bare) == "the query could not be parsed"


def test_a_long_parser_complaint_is_cut_at_a_hundred_characters() -> None:
    error = ParseError.new("failed", description="d" * 150, line=2, col=7, highlight="x")
    assert _parse_failure(error) == (
        "the query could not be parsed at line 2, column 7 near 'x': " + "d" * 99 + "…"
    )


def test_a_guard_needs_a_world_table() -> None:
    with pytest.raises(ValueError, match=r"^a SqlGuard needs at least one world table$"):
        SqlGuard([])


def test_the_world_tables_are_folded_and_sorted() -> None:
    assert SqlGuard(["Tracks", "ARTISTS", "artists"]).world_tables == ("artists", "tracks")


def test_denied_functions_are_added_to_the_built_in_list() -> None:
    guard = SqlGuard(["artists"], denied_functions=["Secret_Sauce"])
    for query in ("SELECT secret_sauce(name) FROM artists", "SELECT getenv('HOME')"):
        assert refusal(query, guard).startswith("function ")
    assert guard.check("SELECT upper(name) FROM artists").tables == ("artists",)
    assert world_guard().check("SELECT secret_sauce(1)").tables == ()  # only where it is denied


@pytest.mark.parametrize(
    "query",
    [
        "SELECT 7 // 2 AS n",  # integer division
        "SELECT 2 ** 3 AS n",
        "SELECT e'a\\tb' AS s",  # an escape string
        "SELECT #1 FROM artists ORDER BY #1",  # a column by position
        # a recursive CTE whose body is in extra parentheses still reads itself
        "WITH RECURSIVE t AS ((SELECT 1 AS n UNION ALL SELECT n + 1 FROM t WHERE n < 3)) "
        "SELECT count(*) AS n FROM t",
    ],
)
def test_duckdb_syntax_a_generic_sql_parser_refuses_is_let_through_and_runs(
    agent_sql: AgentSql, query: str
) -> None:
    agent_sql.guard.check(query)
    assert agent_sql.run(query).row_count >= 1


@pytest.mark.parametrize(
    ("query", "reason"),
    [
        ("SELECT * FROM world.canary", f"table world.canary is not a world table; {WORLD}"),
        # a name that DuckDB would need quoted is quoted back so
        (
            "SELECT * FROM world.all.artists",
            'catalog-qualified name world."all".artists is not allowed; write <table> or '
            f"world.<table>; {WORLD}",
        ),
        (
            "SELECT * FROM $1",
            f"table reference $1 is not a plain table name; select from the world tables: {TABLES}",
        ),
        ("WITH t AS (vacuum) SELECT 1", f"{ONLY}VACUUM"),
        ("(", f"{ONLY}("),
        (
            "SELECT 1; SELECT 2; select 3; SELECT 4; SELECT 5; SELECT 6; DROP TABLE artists",
            "only one statement is allowed: found 7 (SELECT, SELECT, SELECT, SELECT, SELECT)",
        ),
    ],
)
def test_more_refusals_word_for_word(query: str, reason: str) -> None:
    assert refusal(query) == reason


@pytest.mark.parametrize("query", ["SELECT 'abc", 'SELECT "abc', "SELECT 1 /* never closed"])
def test_an_unclosed_quote_or_comment_is_named_with_where_it_is(query: str) -> None:
    reason = refusal(query)
    assert reason.startswith("the query could not be read (check its quotes and comments) near ")
    assert "SELECT " in reason and "tokeniz" not in reason.lower()


@pytest.mark.parametrize("query", [12, None, b"SELECT 1"])
def test_a_query_that_is_not_text_is_refused_naming_its_type(query: object) -> None:
    assert refusal(query) == f"the query must be text, got {type(query).__name__}"  # type: ignore[arg-type]


def test_the_length_limit_allows_exactly_twenty_thousand_characters() -> None:
    head = "SELECT name FROM artists -- "
    assert world_guard().check(head + "x" * (20_000 - len(head))).tables == ("artists",)
    assert refusal(head + "x" * (20_001 - len(head))) == (
        "the query is 20,001 characters long; at most 20,000 are allowed"
    )


@pytest.mark.parametrize(
    ("first", "second", "named"),
    [
        ("(SELECT 1 FROM truth.a)", "getenv('HOME')", "table truth.a "),
        ("getenv('HOME')", "(SELECT 1 FROM truth.a)", "function getenv() "),
    ],
)
def test_the_first_problem_as_written_is_the_one_named(first: str, second: str, named: str) -> None:
    assert refusal(f"SELECT {first} AS x, {second} AS y FROM artists").startswith(named)


@pytest.mark.parametrize(
    ("query", "tables"),
    [
        ("(SELECT name FROM artists)", ("artists",)),
        ("((SELECT name FROM artists) UNION (SELECT name FROM Tracks))", ("artists", "tracks")),
        # a CTE defined inside another CTE's body is visible to the CTEs after it there
        (
            "WITH a AS (WITH x AS (SELECT name FROM artists), y AS (SELECT * FROM x) "
            "SELECT * FROM y) SELECT * FROM a",
            ("artists",),
        ),
        # and one defined in a subquery is visible inside it, under an outer WITH
        (
            "WITH a AS (SELECT 1 AS n) SELECT * FROM (WITH b AS (SELECT name FROM tracks) "
            "SELECT * FROM b) AS s, a",
            ("tracks",),
        ),
    ],
)
def test_queries_in_parentheses_and_nested_ctes_read_the_world_tables(
    query: str, tables: tuple[str, ...]
) -> None:
    assert world_guard().check(query).tables == tables


@pytest.mark.parametrize(
    "query",
    [
        "SELECT name FROM artists; -- the names",
        "SELECT name FROM artists;\n-- the names\n",
        "SELECT name FROM artists /* a */ ; /* the names */",
    ],
)
def test_a_comment_after_the_final_semicolon_is_still_one_statement(
    agent_sql: AgentSql, query: str
) -> None:
    """Found by the mutation run: a semicolon carrying a comment parsed as a second
    statement, and the guard refused one SELECT with "found 2"; DuckDB runs it."""
    assert agent_sql.guard.check(query).tables == ("artists",)
    assert agent_sql.run(query).row_count >= 1
    assert refusal("SELECT 1; /* a */ SELECT 2").startswith(
        "only one statement is allowed: found 2"
    )
