"""A content fingerprint of a set of tables, stable across processes, machines and runs.

The digest is SHA-256 over a canonical serialization:

* a format tag and the caller's ``salt``;
* tables in sorted name order; per table its name, row count, and for each column (in
  the table's column order) its name and dtype;
* per column, every value rendered as text by polars' cast to ``String`` (integers in
  decimal, booleans ``true``/``false``, dates ISO 8601). Non-string columns are joined
  with commas (their text never holds a comma or is empty, so a null is the empty text).
  String columns are joined with the ASCII unit separator (counting it afterwards proves
  no value holds one) and followed by the positions of their nulls; if some value does
  hold the separator, the column is instead concatenated and followed by every value's
  byte length (``-1`` for null). Each column's texts start with a tag naming the form.

Every field is framed with an 8-byte little-endian length, so no two different inputs
serialize to the same bytes. The rendering is done by vectorized string operations (about
0.1 s for 470k rows with a dozen columns), never by Python iteration over rows. Floating
point columns are allowed but hashed through their text rendering, which is stable for a
given polars version; the world tables hold none.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping

import polars as pl

from eval_pipeline.errors import WorldError

FORMAT_TAG = b"eval-pipeline/fingerprint/v1"


def _frame(hasher: hashlib._Hash, data: bytes) -> None:
    hasher.update(len(data).to_bytes(8, "little"))
    hasher.update(data)


_UNIT = "\x1f"  # separates the values of a string column


def _column_texts(df: pl.DataFrame) -> list[str]:
    """The canonical texts of each column, in column order (see the module docstring)."""
    exprs: list[pl.Expr] = []
    for name, dtype in df.schema.items():
        column = pl.col(name)
        if dtype == pl.String:
            exprs.append(column.fill_null("").str.join(_UNIT))
        else:
            # Integers, booleans, dates render without commas and never as "": a null is "".
            exprs.append(column.cast(pl.String).fill_null("").str.join(","))
    # Two columns per pass: both cores busy, and only two columns' text held at a time.
    rendered: list[object] = []
    for start in range(0, len(exprs), 2):
        batch = exprs[start : start + 2]
        rendered.extend(df.select(e.alias(f"c{i}") for i, e in enumerate(batch)).row(0))
    texts: list[str] = []
    for (name, dtype), value in zip(df.schema.items(), rendered, strict=True):
        text = "" if value is None else str(value)
        if dtype != pl.String:
            texts.extend(["text", text])
            continue
        series = df.get_column(name)
        nulls = ""
        if series.null_count():
            nulls = ",".join(str(i) for i in series.is_null().arg_true().to_list())
        if text.count(_UNIT) == max(df.height - 1, 0):
            texts.extend(["joined", text, nulls])
        else:
            # Some value holds the separator itself: frame the values by their lengths.
            lengths = df.select(
                pl.col(name)
                .str.len_bytes()
                .cast(pl.Int64)
                .fill_null(-1)
                .cast(pl.String)
                .str.join(",")
            ).item()
            concatenated = df.select(pl.col(name).fill_null("").str.join("")).item()
            texts.extend(["lengths", str(concatenated or ""), str(lengths or "")])
    return texts


def fingerprint_tables(tables: Mapping[str, pl.DataFrame], salt: str) -> str:
    """SHA-256 hex digest of ``tables`` (any order of the mapping) and ``salt``.

    The same data gives the same digest in any process on any machine; a changed value,
    column name, dtype, column order, row order, table name or salt changes it.
    """
    hasher = hashlib.sha256()
    _frame(hasher, FORMAT_TAG)
    _frame(hasher, salt.encode())
    _frame(hasher, str(len(tables)).encode())
    for name in sorted(tables):
        df = tables[name]
        _frame(hasher, name.encode())
        _frame(hasher, str(df.height).encode())
        _frame(hasher, str(df.width).encode())
        for column, dtype in df.schema.items():
            _frame(hasher, column.encode())
            _frame(hasher, str(dtype).encode())
        if df.width == 0:
            continue
        try:
            texts = _column_texts(df)
        except pl.exceptions.PolarsError as error:
            raise WorldError(
                f"table {name!r} has a column that cannot be fingerprinted: {error}"
            ) from error
        for text in texts:
            _frame(hasher, text.encode())
    return hasher.hexdigest()
