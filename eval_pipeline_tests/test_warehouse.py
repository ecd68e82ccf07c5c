"""Whole-table writes and reads in the DuckDB warehouse, ENUM-stored text included."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest

from eval_pipeline import warehouse
from eval_pipeline.errors import LockedError, WarehouseError
from eval_pipeline.warehouse import (
    ENUM_MIN_ROWS,
    connect,
    connect_when_free,
    read_schema,
    read_table,
    read_value,
    transaction,
    upsert_in_order,
    write_tables,
)


def big_frame(offset: int = 0) -> pl.DataFrame:
    rows = ENUM_MIN_ROWS + 10
    index = pl.int_range(0, rows, eager=True)
    return pl.DataFrame(
        {
            "line_id": index + offset,
            "channel": pl.Series(["streaming", "download", "sync"] * rows)[:rows],
            "isrc": index.cast(pl.String).str.zfill(6),
            "note": pl.Series([None, "x"] * rows, dtype=pl.String)[:rows],
        }
    )


def test_large_text_columns_round_trip_and_query_as_text(tmp_path: Path) -> None:
    conn = connect(tmp_path / "w.duckdb")
    frame = big_frame()
    write_tables(conn, "world", {"lines": frame, "small": pl.DataFrame({"a": ["x"]})})
    types = dict(
        conn.execute(
            "SELECT column_name, data_type FROM duckdb_columns() WHERE table_name = 'lines'"
        ).fetchall()
    )
    assert types["channel"].startswith("ENUM") and types["note"] == "VARCHAR"
    assert read_table(conn, "world", "lines").equals(frame)
    count = conn.execute(
        "SELECT count(*) FROM world.lines WHERE channel = 'sync' AND isrc LIKE '00%'"
    ).fetchone()
    assert count == (
        frame.filter((pl.col("channel") == "sync") & pl.col("isrc").str.starts_with("00")).height,
    )


def test_a_text_column_is_an_enum_exactly_when_it_holds_few_enough_values(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Free text is refused on its first rows when they already hold more values than an
    ENUM takes; a column whose first rows hold few but whose later rows hold many is text
    too, and one at the limit is an ENUM."""
    monkeypatch.setattr(warehouse, "ENUM_MIN_ROWS", 1_000)
    monkeypatch.setattr(warehouse, "ENUM_MAX_VALUES", 100)
    rows = 1_000
    index = pl.int_range(0, rows, eager=True)
    frame = pl.DataFrame(
        {
            "at_limit": (index % 100).cast(pl.String),
            "over_limit": (index % 101).cast(pl.String),
            "late": pl.Series([str(i % 10 if i < 400 else i) for i in range(rows)]),
            "free": index.cast(pl.String),
            "enum_free": index.cast(pl.String).cast(pl.Enum(index.cast(pl.String))),
        }
    )
    conn = connect(tmp_path / "w.duckdb")
    write_tables(conn, "world", {"lines": frame})
    types = dict(
        conn.execute(
            "SELECT column_name, data_type FROM duckdb_columns() WHERE table_name = 'lines'"
        ).fetchall()
    )
    assert {column: kind.startswith("ENUM") for column, kind in types.items()} == {
        "at_limit": True,
        "over_limit": False,
        "late": False,
        "free": False,
        "enum_free": False,
    }
    assert read_table(conn, "world", "lines").equals(
        frame.with_columns(pl.col("enum_free").cast(pl.String))
    )


def test_rewriting_a_table_replaces_it_and_its_types(tmp_path: Path) -> None:
    conn = connect(tmp_path / "w.duckdb")
    write_tables(conn, "world", {"lines": big_frame()})
    changed = big_frame(offset=7).with_columns(pl.col("channel").str.to_uppercase())
    write_tables(conn, "world", {"lines": changed})
    assert read_schema(conn, "world")["lines"].equals(changed)


def test_failed_write_leaves_the_previous_tables(tmp_path: Path) -> None:
    conn = connect(tmp_path / "w.duckdb")
    write_tables(conn, "world", {"lines": big_frame()})
    with pytest.raises(WarehouseError, match="identifier"):
        write_tables(conn, "world", {"lines": big_frame(offset=1), "z bad name": big_frame()})
    assert read_table(conn, "world", "lines").equals(big_frame())


def test_missing_table_is_named(tmp_path: Path) -> None:
    conn = connect(tmp_path / "w.duckdb")
    with pytest.raises(WarehouseError, match=r"world\.nothing"):
        read_table(conn, "world", "nothing")


def test_a_write_and_a_recorded_value_import_neither_pandas_nor_pyarrow(tmp_path: Path) -> None:
    """Binding a Python object to a DuckDB query (a registered frame, a parameter) imports
    pandas first (DuckDB 1.5), about 0.7 s of a world's load; a frame read imports pyarrow.
    The world's path does neither: tables go through staged Parquet files."""
    script = f"""
import sys
import polars as pl
from eval_pipeline.warehouse import connect, read_value, write_tables
conn = connect(__import__("pathlib").Path({str(tmp_path / "w.duckdb")!r}))
frame = pl.DataFrame({{"line_id": list(range({ENUM_MIN_ROWS + 5})), "channel": "sync"}})
write_tables(conn, "world", {{"lines": frame, "info": pl.DataFrame({{"fingerprint": ["f"]}})}})
assert read_value(conn, "world", "info", "fingerprint") == "f"
print(sorted(m for m in ("pandas", "pyarrow") if m in sys.modules))
"""
    output = subprocess.run(
        [sys.executable, "-c", script], check=True, capture_output=True, text=True
    ).stdout
    assert output.strip() == "[]"


def test_a_recorded_value_needs_exactly_one_row(tmp_path: Path) -> None:
    conn = connect(tmp_path / "w.duckdb")
    write_tables(conn, "meta", {"two": pl.DataFrame({"fingerprint": ["a", "b"]})})
    with pytest.raises(WarehouseError, match="2 rows, not one"):
        read_value(conn, "meta", "two", "fingerprint")
    with pytest.raises(WarehouseError, match=r"meta\.nothing"):
        read_value(conn, "meta", "nothing", "fingerprint")


def test_text_with_quotes_and_enums_survives_the_staging(tmp_path: Path) -> None:
    conn = connect(tmp_path / "w.duckdb")
    frame = big_frame().with_columns(
        channel=pl.col("channel") + pl.lit("'; DROP TABLE x; --"), when=pl.date(2025, 1, 2)
    )
    write_tables(conn, "world", {"lines": frame})
    assert read_table(conn, "world", "lines").equals(frame)


def test_both_kinds_of_connection_hand_memory_back_after_each_task(tmp_path: Path) -> None:
    # DuckDB's default keeps up to 128 MB a task; at 10x scale that stayed resident through
    # the suite's work after the world was loaded.
    path = tmp_path / "warehouse.duckdb"
    for read_only in (False, True):
        conn = connect(path, read_only=read_only)
        (threshold,) = conn.execute(
            "SELECT value FROM duckdb_settings() WHERE name = 'allocator_flush_threshold'"
        ).fetchone() or ("",)
        conn.close()
        assert threshold == "7.6 MiB"


@pytest.mark.parametrize("rows", [7, 3000])
def test_upserted_rows_keep_the_order_they_came_in_and_the_last_of_a_key_wins(
    tmp_path: Path, rows: int
) -> None:
    """Row ids are the order loaded: DuckDB's INSERT OR REPLACE kept no load's order (the
    flaky relabel examples test read "rows in the order loaded" as another order)."""
    con = connect(tmp_path / "w.duckdb")
    con.execute("CREATE TABLE main.t (id VARCHAR PRIMARY KEY, v INTEGER)")
    ids = [f"id-{(i * 7919) % rows:05d}" for i in range(rows)]  # not in sorted order
    with transaction(con):
        upsert_in_order(con, "main.t", pl.DataFrame({"id": ids, "v": range(rows)}))
    assert [r[0] for r in con.execute("SELECT id FROM t ORDER BY rowid").fetchall()] == ids
    # the second load: one stored row replaced (it takes its new place), a key twice (the
    # last wins, at its place), a new row
    again = pl.DataFrame({"id": [ids[0], "new", "new"], "v": [-1, 1, 2]})
    with transaction(con):
        upsert_in_order(con, "main.t", again)
    stored = con.execute("SELECT id, v FROM t ORDER BY rowid").fetchall()
    assert stored == [*((i, v) for v, i in enumerate(ids) if v > 0), (ids[0], -1), ("new", 2)]


def test_an_upsert_into_a_table_with_no_primary_key_is_refused(tmp_path: Path) -> None:
    con = connect(tmp_path / "w.duckdb")
    con.execute("CREATE TABLE main.t (id VARCHAR)")
    with pytest.raises(ValueError, match=r"main\.t has no primary key"):
        upsert_in_order(con, "main.t", pl.DataFrame({"id": ["a"]}))


HOLD = (
    "import sys, time, duckdb; c = duckdb.connect(sys.argv[1]); print('held', flush=True); "
    "time.sleep(float(sys.argv[2])); c.close()"
)


def _hold(path: Path, seconds: float) -> subprocess.Popen[str]:
    """Another process writing the warehouse for `seconds` (started once it holds it)."""
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(path), str(seconds)], stdout=subprocess.PIPE, text=True
    )
    assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
    return holder


def test_a_warehouse_step_waits_for_a_writer_that_the_pool_let_in_beside_it(tmp_path: Path) -> None:
    """Seen running the arithmetic example under load: two lane runs entered the warehouse
    step together (Dagster's SQLite pool claim is a plain select, so two claims at one
    instant can both win) and the second failed on DuckDB's lock instead of waiting."""
    from eval_pipeline.defs.resources import WarehouseResource

    path = tmp_path / "warehouse.duckdb"
    connect(path).close()
    holder = _hold(path, 1.5)
    try:
        with pytest.raises(LockedError):
            connect(path).close()
        with WarehouseResource(path=str(path)).connection() as conn:
            assert conn.execute("select 1").fetchone() == (1,)
    finally:
        holder.communicate(timeout=30)


def test_a_writer_that_stays_is_still_one_locked_error(tmp_path: Path) -> None:
    path = tmp_path / "warehouse.duckdb"
    connect(path).close()
    holder = _hold(path, 20)
    try:
        with pytest.raises(LockedError, match="open for writing in another process"):
            connect_when_free(path, wait_s=1.0)
    finally:
        holder.kill()
        holder.communicate(timeout=30)
