"""Statement lines hold their text as Enum codes, and the world reads the same either way."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from eval_pipeline import world_stages
from eval_pipeline.warehouse import connect
from eval_pipeline.world import get_world_plugin
from eval_pipeline.world.base import GeneratedWorld
from eval_pipeline.world.fingerprint import fingerprint_tables
from eval_pipeline.world.label.line_text import (
    LINE_TEXT_COLUMNS,
    as_text,
    encode_line_text,
    keyed_like,
    mapped,
)


def test_the_lines_text_is_codes_of_its_own_values_in_sorted_order(
    label_world: GeneratedWorld,
) -> None:
    lines = label_world.tables["statement_lines"]
    for column in LINE_TEXT_COLUMNS:
        dtype = lines.schema[column]
        assert isinstance(dtype, pl.Enum), column
        present = lines.get_column(column).cast(pl.String).unique().sort()
        assert dtype.categories.equals(present), column
        assert lines.get_column(column).to_physical().dtype in (pl.UInt8, pl.UInt16), column
    # Every other table holds text.
    for name, table in label_world.tables.items():
        if name != "statement_lines":
            assert not any(isinstance(t, pl.Enum | pl.Categorical) for t in table.dtypes), name


@pytest.mark.parametrize("scale", [0.03, 0.3], ids=["stored-as-text", "stored-as-enum"])
def test_a_world_read_back_from_the_warehouse_holds_its_lines_as_generated(
    tmp_path: Path, scale: float
) -> None:
    """Small tables are stored as text, large ones with DuckDB ENUMs (read back as
    Categorical codes): either way the lines come back as the generated world's Enums."""
    world = get_world_plugin("label").generate(seed=21, scale=scale)
    conn = connect(tmp_path / "warehouse.duckdb")
    world_stages.store_world(conn, world)
    loaded = world_stages.load_world(conn)
    conn.close()
    assert loaded.fingerprint == world.fingerprint
    for name, table in world.tables.items():
        assert loaded.tables[name].schema == table.schema, name
        assert loaded.tables[name].equals(table), name


def test_encoding_lines_already_encoded_gives_back_the_same_frame(
    label_world: GeneratedWorld,
) -> None:
    """Results remembered by a frame's identity (the evidence scan, the coded lines) must
    survive ``world_from_tables``: a new frame object would have them computed again."""
    lines = label_world.tables["statement_lines"]
    assert encode_line_text(lines) is lines
    again = get_world_plugin("label").world_from_tables(
        label_world.seed, label_world.scale, label_world.tables
    )
    assert all(again.tables[name] is label_world.tables[name] for name in label_world.tables)


def test_the_fingerprint_reads_text_the_same_however_it_is_held() -> None:
    text = pl.DataFrame({"id": [1, 2, 3], "code": ["b", None, "a"]})
    digest = fingerprint_tables({"t": text}, "s")
    for held in (pl.Categorical, pl.Enum(["a", "b"]), pl.Enum(["b", "a", "z"])):
        assert fingerprint_tables({"t": text.with_columns(pl.col("code").cast(held))}, "s") == (
            digest
        )
    other = text.with_columns(pl.col("code").replace("a", "c"))
    assert (
        fingerprint_tables({"t": other.with_columns(pl.col("code").cast(pl.Enum(["b", "c"])))}, "s")
        != digest
    )


_words = st.sampled_from(["ST-1", "ST-2", "ST-10", "äö", "", "zz"])


@settings(max_examples=200, deadline=None)
@given(
    values=st.lists(st.one_of(st.none(), _words), min_size=1, max_size=30),
    mapping=st.dictionaries(_words, st.integers(-5, 5), max_size=6),
)
def test_a_lookup_on_codes_equals_the_lookup_on_text(
    values: list[str | None], mapping: dict[str, int]
) -> None:
    text = pl.DataFrame({"k": values}, schema={"k": pl.String})
    coded = text.with_columns(pl.col("k").cast(pl.Enum(text["k"].drop_nulls().unique().sort())))
    expected = text.select(mapped("k", pl.String(), mapping, pl.Int64))
    assert coded.select(mapped("k", coded.schema["k"], mapping, pl.Int64)).equals(expected)
    assert expected.get_column("k").to_list() == [mapping.get(v) for v in values]  # type: ignore[arg-type]


@settings(max_examples=200, deadline=None)
@given(
    values=st.lists(_words, min_size=1, max_size=30),
    others=st.lists(st.tuples(_words, st.integers(0, 9)), max_size=8, unique_by=lambda t: t[0]),
    how=st.sampled_from(["inner", "semi", "left"]),
)
def test_a_join_on_codes_equals_the_join_on_text(
    values: list[str], others: list[tuple[str, int]], how: str
) -> None:
    lines = pl.DataFrame({"line_id": range(len(values)), "k": values})
    coded = lines.with_columns(pl.col("k").cast(pl.Enum(lines["k"].unique().sort())))
    other = pl.DataFrame(
        {"k": [k for k, _ in others], "v": [v for _, v in others]},
        schema={"k": pl.String, "v": pl.Int64},
    )
    expected = lines.join(other, on="k", how=how).sort("line_id")  # type: ignore[arg-type]
    got = coded.join(keyed_like(other, coded, ["k"]), on="k", how=how)  # type: ignore[arg-type]
    assert as_text(got).sort("line_id").equals(expected)


def _lines_of(columns: dict[str, pl.Series]) -> pl.DataFrame:
    """A frame of statement lines whose text columns are ``columns`` (the rest numbers)."""
    height = len(next(iter(columns.values())))
    numbers = {c: pl.Series(c, range(height)) for c in ("line_id", "units", "amount_minor")}
    return pl.DataFrame(
        [numbers.get(c, columns.get(c)) for c in LINE_TEXT_COLUMNS + tuple(numbers)]
    )


@settings(max_examples=200, deadline=None)
@given(
    values=st.lists(st.one_of(st.none(), _words), min_size=1, max_size=30),
    held_as=st.sampled_from(["text", "categorical", "enum", "enum-unused", "enum-unsorted"]),
    seen_before=st.lists(st.text(max_size=3), max_size=5),
)
def test_lines_encode_to_the_enum_of_their_sorted_values_however_their_text_is_held(
    values: list[str | None], held_as: str, seen_before: list[str]
) -> None:
    """Text, Categorical codes (numbered by whatever the process saw before) or an Enum
    (with categories unused or out of order) encode to the Enum of the values present,
    sorted, row for row; an Enum already so is left as it is."""
    # Codes taken in the global mapping by text the process still holds.
    held_before = pl.Series(seen_before, dtype=pl.Categorical)
    text = pl.Series("statement_id", values, dtype=pl.String)
    present = sorted({v for v in values if v is not None})
    held = {
        "text": text,
        "categorical": text.cast(pl.Categorical),
        "enum": text.cast(pl.Enum(present)),
        "enum-unused": text.cast(pl.Enum([*present, "~unused"])),
        "enum-unsorted": text.cast(pl.Enum(present[::-1])),
    }[held_as]
    lines = _lines_of({c: held.alias(c) for c in LINE_TEXT_COLUMNS})
    encoded = encode_line_text(lines)
    for column in LINE_TEXT_COLUMNS:
        got = encoded.get_column(column)
        assert got.dtype == pl.Enum(present), column
        assert got.cast(pl.String).to_list() == values, column
    assert held_before.len() == len(seen_before)
    already = isinstance(held.dtype, pl.Enum) and held.dtype.categories.to_list() == present
    assert (encoded is lines) == already
