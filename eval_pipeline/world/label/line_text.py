"""The text of statement lines, held as polars Enums.

A line's text (its statement, distributor, period, ISRC, channel, territory, outlet and
currency) is a handful of distinct values repeated over millions of rows. As text every row
costs a 16-byte view per column; as an Enum a one- or two-byte code. At 10x scale that is
600 MB of the world against about 40, and every frame that carries a line's text (the
registry, the evidence, the coded lines' sources) shrinks with it.

Categories are each column's own values in sorted order, so sorting, comparing and min/max
give what they give on the text, and a world read back from storage (as text, or as the
Categorical codes of DuckDB's ENUMs) encodes to the same dtypes as the one generated. The
fingerprint hashes the text however it is held (:mod:`eval_pipeline.world.fingerprint`).

Polars refuses to join an Enum with text or with another Enum, and ``replace_strict`` casts
its keys to the column's categories: the helpers here are how the rest of the world meets
these columns.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import numpy as np
import polars as pl
from polars._typing import PolarsDataType

LINE_COLUMNS: tuple[str, ...] = (
    "line_id",
    "statement_id",
    "distributor_id",
    "period",
    "isrc",
    "channel",
    "territory",
    "outlet",
    "units",
    "amount_minor",
    "currency",
)
LINE_TEXT_COLUMNS: tuple[str, ...] = tuple(
    c for c in LINE_COLUMNS if c not in ("line_id", "units", "amount_minor")
)


def encode_line_text(lines: pl.DataFrame) -> pl.DataFrame:
    """``lines`` with each of :data:`LINE_TEXT_COLUMNS` an Enum of its own values, sorted
    (from text, Categorical codes or another Enum). Lines already so encoded are returned
    as they are: results remembered by the frame's identity (:mod:`eval_pipeline.world.memo`)
    stay valid."""
    encoded = {}
    for column in LINE_TEXT_COLUMNS:
        series = lines.get_column(column)
        if not _is_encoded(series):
            encoded[column] = _sorted_enum(series)
    return lines.with_columns(**encoded) if encoded else lines


def _is_encoded(series: pl.Series) -> bool:
    """Whether ``series`` is an Enum of sorted categories, every one of them used (told from
    its codes: no text is looked at)."""
    dtype = series.dtype
    if not isinstance(dtype, pl.Enum) or not dtype.categories.is_sorted():
        return False
    codes = series.to_physical().drop_nulls().to_numpy()
    return bool(np.bincount(codes, minlength=dtype.categories.len()).all())


def _sorted_enum(series: pl.Series) -> pl.Series:
    """``series`` as an Enum of its values, sorted. Codes (Categorical, Enum) are renumbered
    by a gather from the codes present, each present value's text looked up once: casting
    them would make every row's text."""
    dtype = series.dtype
    if isinstance(dtype, pl.Enum):
        text_of_code = dtype.categories
    elif isinstance(dtype, pl.Categorical):
        text_of_code = dtype.categories.to_series()  # ordered by code (polars documents it)
    else:
        return series.cast(pl.Enum(series.unique().drop_nulls().sort()))
    codes = series.to_physical()
    present = np.flatnonzero(np.bincount(codes.drop_nulls().to_numpy()))
    text = text_of_code.gather(present)
    order = text.arg_sort().to_numpy()
    values = text.gather(order)
    renumber = np.zeros(int(present.max(initial=0)) + 1, dtype=np.uint32)
    renumber[present[order]] = np.arange(len(values), dtype=np.uint32)
    return pl.Series(series.name, values, dtype=pl.Enum(values)).gather(
        pl.Series(renumber).gather(codes)
    )


def as_text(frame: pl.DataFrame, columns: Iterable[str] | None = None) -> pl.DataFrame:
    """``frame`` with its Enum and Categorical columns (or those named) as text: for a
    frame small enough to meet text columns of other tables in a join or a concat (and the
    frame itself when it holds none)."""
    names = (
        [c for c, t in frame.schema.items() if isinstance(t, pl.Enum | pl.Categorical)]
        if columns is None
        else list(columns)
    )
    return frame.with_columns(pl.col(names).cast(pl.String)) if names else frame


def mapped(
    column: str,
    dtype: pl.DataType,
    mapping: Mapping[str, object],
    return_dtype: PolarsDataType,
) -> pl.Expr:
    """``column``'s values looked up in ``mapping`` (null where absent): for an Enum
    ``dtype`` once per category, then gathered by code, so no row's text is materialized;
    for text, ``replace_strict`` with a null default."""
    if not isinstance(dtype, pl.Enum):
        return pl.col(column).replace_strict(mapping, default=None, return_dtype=return_dtype)
    by_code = pl.Series(
        [mapping.get(value) for value in dtype.categories.to_list()], dtype=return_dtype
    )
    return pl.lit(by_code).gather(pl.col(column).to_physical()).alias(column)


def keyed_like(
    other: pl.DataFrame, lines: pl.DataFrame | pl.Schema, columns: Iterable[str]
) -> pl.DataFrame:
    """``other`` (a small table to join onto ``lines``) with its ``columns`` in the lines'
    Enum dtypes; a value the lines never hold becomes null, which matches nothing. Only for
    ``other`` on the right of an inner, semi or left join from the lines: its key columns
    are not the values it had."""
    schema = lines if isinstance(lines, pl.Schema) else lines.schema
    return other.with_columns(pl.col(c).cast(schema[c], strict=False) for c in columns)
