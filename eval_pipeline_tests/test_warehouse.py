"""Whole-table writes and reads in the DuckDB warehouse, ENUM-stored text included."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

from eval_pipeline.errors import WarehouseError
from eval_pipeline.warehouse import ENUM_MIN_ROWS, connect, read_schema, read_table, write_tables


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
