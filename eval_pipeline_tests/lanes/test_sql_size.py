"""The guard's refusal of row generators and unbounded value builders (issue 25, finding 2).

Pure guard tests (no database): each builds its own SqlGuard, so mutation testing sees the
code under test (bench/mutation.md)."""

from __future__ import annotations

import pytest
import sqlglot
from sqlglot import exp

from eval_pipeline.lanes.errors import SqlRefusedError
from eval_pipeline.lanes.sql_guard import SqlGuard
from eval_pipeline.lanes.sql_size import MAX_BUILT, size_refusal

TABLES = ("artists", "tracks", "statement_lines")


def guard() -> SqlGuard:
    return SqlGuard(TABLES)


def refusal(query: str) -> str:
    with pytest.raises(SqlRefusedError) as refused:
        guard().check(query)
    return refused.value.reason


def function(sql: str) -> exp.Func:
    node = sqlglot.parse_one(f"SELECT {sql}", read="duckdb").expressions[0]
    assert isinstance(node, exp.Func)
    return node


def test_the_findings_two_queries_are_refused_with_a_reason() -> None:
    assert refusal("SELECT unnest(generate_series(1, 300000000))") == (
        "generate_series() and range() are not allowed: run_sql reads the world tables; it "
        "does not generate rows or lists"
    )
    assert refusal("SELECT length(repeat('x', 900000000))") == (
        "repeat() builds a value of the size it is given: the size must be a whole number of "
        "at most 10,000 written in the query (got 900,000,000)"
    )


@pytest.mark.parametrize(
    "query",
    [
        "SELECT range(5)",
        "SELECT RANGE(1, 10, 2)",
        "SELECT unnest(range(3)) FROM artists",
        "SELECT count(*) FROM artists WHERE 3 IN (SELECT unnest(generate_series(1, 5)))",
        "SELECT list_transform(generate_series(1, 9), x -> x * 2)",
        "SELECT main.range(3)",
        "SELECT system.main.generate_series(1, 300000000)",
        "SELECT MAIN.GENERATE_SERIES(1, 3)",
    ],
)
def test_generators_are_refused_in_any_position(query: str) -> None:
    assert "are not allowed: run_sql reads the world tables" in refusal(query)


@pytest.mark.parametrize(
    ("query", "name", "got"),
    [
        ("SELECT repeat('x', 10001)", "repeat", "10,001"),
        ("SELECT repeat('x', 1e9)", "repeat", "1e9"),
        ("SELECT repeat(name, length(name) * 1000) FROM artists", "repeat", "LENGTH(name) * 1000"),
        # shown in DuckDB's spelling, as the agent wrote it (not sqlglot's generic CAST)
        ("SELECT repeat('x', line_id // 2) FROM statement_lines", "repeat", "line_id // 2"),
        ("SELECT lpad(name, 100000, '0') FROM artists", "lpad", "100,000"),
        ("SELECT rpad(name, 10001) FROM artists", "rpad", "10,001"),
        ("SELECT rpad(name, (SELECT count(*) FROM tracks)) FROM artists", "rpad", "(SELECT"),
        ("SELECT list_resize([1], 99999999)", "list_resize", "99,999,999"),
        ("SELECT array_resize([1], 10001, 0)", "array_resize", "10,001"),
        ("SELECT bar(1, 0, 10, 20000)", "bar", "20,000"),
        ("SELECT list_resize([1])", "list_resize", "no size"),
        ("SELECT main.repeat('x', 900000000)", "repeat", "900,000,000"),
        ("SELECT main.repeat('x')", "repeat", "no size"),
        ("SELECT system.main.lpad('x', 20000, 'y')", "lpad", "20,000"),
        ("SELECT main.RPAD('x', 20000)", "rpad", "20,000"),
        ("SELECT main.bar(1, 0, 2, 10001)", "bar", "10,001"),
    ],
)
def test_builders_need_a_literal_size_up_to_the_bound(query: str, name: str, got: str) -> None:
    reason = refusal(query)
    assert reason.startswith(
        f"{name}() builds a value of the size it is given: the size must be a whole number of "
        f"at most {MAX_BUILT:,} written in the query (got {got}"
    )


@pytest.mark.parametrize(
    "query",
    [
        "SELECT repeat('-', 20)",
        f"SELECT repeat('-', {MAX_BUILT})",
        "SELECT repeat('-', -5)",
        "SELECT lpad(CAST(line_id AS VARCHAR), 10, '0') FROM statement_lines",
        f"SELECT rpad(name, {MAX_BUILT}) FROM artists",
        f"SELECT list_resize([1, 2], {MAX_BUILT})",
        "SELECT bar(3, 0, 10)",
        "SELECT bar(3, 0, 10, 40)",
        "SELECT printf('%-12s|%8.2f', name, 1.5) FROM artists",
        f"SELECT printf('%{MAX_BUILT}d', 1)",
        "SELECT format('{:>10}', name) FROM artists",
        "SELECT printf('no widths')",
        "SELECT main.repeat('-', 3), main.lpad('x', 3, 'y'), main.bar(1, 0, 2)",
        "SELECT main.printf('%5d', 1), main.format('{:>5}', 2)",
        "SELECT upper(name), length(name) FROM artists",
    ],
)
def test_bounded_builders_and_other_functions_pass(query: str) -> None:
    guard().check(query)


@pytest.mark.parametrize(
    ("query", "reason"),
    [
        (
            "SELECT printf('%999999999d', 1)",
            "printf() widths and precisions must be at most 10,000 (the format asks for "
            "999,999,999)",
        ),
        (
            "SELECT format('{:>10001}', 1)",
            "format() widths and precisions must be at most 10,000 (the format asks for 10,001)",
        ),
        (
            "SELECT printf(name, 1) FROM artists",
            "printf() needs its format written in the query as a string literal",
        ),
        ("SELECT printf()", "printf() needs its format written in the query as a string literal"),
        (
            "SELECT main.format('{:>20000}', 1)",
            "format() widths and precisions must be at most 10,000 (the format asks for 20,000)",
        ),
        (
            "SELECT format(name) FROM artists",
            "format() needs its format written in the query as a string literal",
        ),
    ],
)
def test_format_strings_must_be_literal_and_narrow(query: str, reason: str) -> None:
    assert refusal(query) == reason


def test_the_size_check_itself_on_parsed_functions() -> None:
    assert size_refusal(function("upper('x')")) is None
    assert size_refusal(function("bar(1, 0, 2)")) is None
    assert size_refusal(function("some_udf(1, 2, 3, 99999999)")) is None
    assert size_refusal(function("repeat('x', -99999999)")) is None
    assert size_refusal(function("lpad('x', -3)")) is None
    assert size_refusal(function("repeat('x', 2.5)")) == (
        "repeat() builds a value of the size it is given: the size must be a whole number of "
        "at most 10,000 written in the query (got 2.5)"
    )
    assert size_refusal(function("repeat('x', -2.5)")) is not None
    assert size_refusal(function("repeat('x', '5')")) is not None
    assert size_refusal(function("Generate_Series(1, 2)")) is not None
    assert size_refusal(function("PrintF('%5s', 'x')")) is None
    assert size_refusal(function("LIST_RESIZE([1], 20000)")) is not None
    long_expression = "+".join(["line_id"] * 20)
    reason = size_refusal(function(f"repeat('x', {long_expression})"))
    assert reason is not None and reason.endswith("(got " + ("line_id + " * 5)[:40] + ")")
