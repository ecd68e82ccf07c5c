"""A content fingerprint of a set of tables, stable across processes, machines and runs.

The digest is SHA-256 over a canonical serialization:

* a format tag and the caller's ``salt``;
* tables in sorted name order; per table its name, row count, column count, and for each
  column (in the table's column order) its name and dtype (text is named ``String``
  whether held as text, Categorical or Enum codes: the same text is the same content);
* per column, one SHA-256 digest of its values' bytes (below); the column digests enter the
  outer hash in column order.

A column's bytes are its values as fixed-width little-endian numbers, not text:

* integers, dates and datetimes: their physical integers at the dtype's own width (a date
  is its int32 day number); booleans one byte each (0 or 1); floats IEEE 754 binary64;
* text: the UTF-8 bytes of every value, concatenated, and apart from them every value's
  byte length as a uint32 (so no two lists of strings give the same bytes);
* nulls: a null value is stored as 0 (or the empty text), and a column with nulls adds
  its validity as a bitmap (``1`` = present, most significant bit first, zero-padded).

A column digest is SHA-256 over the form tag (``fixed``, ``text``, ``null``), the data
digest, the lengths digest (text), and the validity (``-`` when there are no nulls), each
framed. The data and lengths are fed to their hashes a slice of rows at a time, so the
digest does not depend on how polars chunked the column and memory stays a slice's worth
(the text rendering of format v2 built a string per value: at 10x scale that was the
biggest allocation of the whole world stage). An Enum whose categories are all one width in
bytes (most of the statement lines' text) gives the same bytes gathered from its codes.

Every field is framed with an 8-byte little-endian length, so no two different inputs
serialize to the same bytes. Columns are hashed on two threads when a table is large
(polars, numpy and hashlib release the GIL).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from contextlib import nullcontext

import numpy as np
import polars as pl

from eval_pipeline.errors import WorldError
from eval_pipeline.world.memo import ByTables

FORMAT_TAG = b"eval-pipeline/fingerprint/v3"
_PARALLEL_ROWS = 50_000  # below this, a thread pool costs more than it saves
SLICE_ROWS = 1 << 20
"""Rows hashed at a time (the digest is the same for any slice size)."""
TEXT_SLICE_ROWS = 1 << 16
"""Rows of text hashed at a time: a slice's text is held three times over while it is
hashed (joined by polars, as a Python string, as UTF-8 bytes), so a million rows of a long
text column cost hundreds of MB at once (at 10x, the answer key's registry descriptions
were the whole pipeline's memory peak); 65,536 rows keep that to a few MB."""
CODES_SLICE_BYTES = 1 << 20
"""Bytes of text gathered and hashed at a time from an Enum of one width (below)."""


def _frame(hasher: hashlib._Hash, data: bytes) -> None:
    hasher.update(len(data).to_bytes(8, "little"))
    hasher.update(data)


def _little_endian(series: pl.Series) -> np.ndarray:
    """A null-free numeric series as a little-endian array of its physical width."""
    values = series.to_numpy(allow_copy=True)
    if values.dtype == np.bool_:
        return values.astype(np.uint8)
    return values.astype(values.dtype.newbyteorder("<"), copy=False)


def _validity(series: pl.Series) -> bytes:
    if not series.null_count():
        return b"-"
    return np.packbits(series.is_not_null().to_numpy()).tobytes()


def _is_text(dtype: pl.DataType) -> bool:
    return dtype in (pl.String, pl.Categorical) or isinstance(dtype, pl.Enum)


def _dtype_name(dtype: pl.DataType) -> str:
    """A text column is named ``String`` however it is held (text, Categorical, Enum): the
    values are the same text, and storage (DuckDB's ENUM read back as text) may change the
    holding but not the content."""
    return "String" if _is_text(dtype) else str(dtype)


def _hash_equal_width_codes(
    series: pl.Series, dtype: pl.Enum, data: hashlib._Hash, lengths: hashlib._Hash
) -> bool:
    """Feed the text of an Enum column (``series`` of ``dtype``) whose categories are all one
    width in bytes (an ISRC, a period, a statement id), null-free, to ``data`` and
    ``lengths``: each row's text is its category's row of a width-wide byte table, gathered
    by code in numpy, with no string built per row. False, having fed nothing, for any
    other column."""
    categories = [c.encode() for c in dtype.categories.to_list()]
    width = len(categories[0]) if categories else 0
    if not width or series.null_count() or any(len(c) != width for c in categories):
        return False
    table = np.frombuffer(b"".join(categories), dtype=np.uint8).reshape(len(categories), width)
    slice_rows = max(1, CODES_SLICE_BYTES // width)
    widths = np.full(min(slice_rows, series.len()), width, dtype="<u4")
    for start in range(0, series.len(), slice_rows):
        codes = series.slice(start, slice_rows).to_physical().to_numpy()
        data.update(np.take(table, codes, axis=0).data)
        lengths.update(widths[: len(codes)].data)
    return True


def _column_digest(series: pl.Series) -> bytes:
    """SHA-256 of one column's canonical bytes (see the module docstring)."""
    data, lengths = hashlib.sha256(), hashlib.sha256()
    dtype = series.dtype
    if dtype == pl.Null:
        form = b"null"
    elif isinstance(dtype, pl.Enum) and _hash_equal_width_codes(series, dtype, data, lengths):
        form = b"text"
    elif _is_text(dtype):
        form = b"text"
        for start in range(0, max(series.len(), 1), TEXT_SLICE_ROWS):
            # Codes (Enum, Categorical) become text a slice at a time, not a whole column.
            part = series.slice(start, TEXT_SLICE_ROWS).cast(pl.String)
            data.update(str(part.fill_null("").str.join("").item() or "").encode())
            sizes = part.str.len_bytes().fill_null(0).cast(pl.UInt32)
            lengths.update(_little_endian(sizes).tobytes())
    elif dtype.is_numeric() or dtype.is_temporal() or dtype == pl.Boolean:
        form = b"fixed"
        physical = series.to_physical()
        filler = False if dtype == pl.Boolean else 0
        for start in range(0, max(physical.len(), 1), SLICE_ROWS):
            part = physical.slice(start, SLICE_ROWS).fill_null(filler)
            data.update(_little_endian(part).tobytes())
    else:
        raise WorldError(f"column {series.name!r} of type {dtype} cannot be fingerprinted")
    hasher = hashlib.sha256()
    _frame(hasher, form)
    _frame(hasher, data.digest())
    _frame(hasher, lengths.digest())
    _frame(hasher, _validity(series))
    return hasher.digest()


def _column_digests(df: pl.DataFrame, pool: ThreadPoolExecutor | None) -> list[bytes]:
    columns = df.get_columns()
    if pool is None or df.height < _PARALLEL_ROWS:
        return [_column_digest(series) for series in columns]
    return list(pool.map(_column_digest, columns))


_DIGESTED = ByTables(("table",), lambda one: _column_digests(one["table"], None), size=32)
"""Column digests computed ahead (:func:`digest_ahead`), by the identity of their frame."""


def digest_ahead(tables: Mapping[str, pl.DataFrame]) -> None:
    """Hash the columns of ``tables`` now, so that :func:`fingerprint_tables` of these very
    frames later only combines the digests: for a caller that has the tables before it
    knows the salt (the fixtures' check reads the answer key while the world it salts the
    key's fingerprint with is still being fingerprinted)."""
    for name, df in tables.items():
        _table_digests(name, df, None, remember=True)


def _table_digests(
    name: str, df: pl.DataFrame, pool: ThreadPoolExecutor | None, *, remember: bool = False
) -> list[bytes]:
    """Table ``name``'s column digests: those computed ahead for this very frame, else
    computed now (and remembered, with ``remember``); a column polars cannot read as
    bytes is named in a WorldError."""
    ahead = _DIGESTED.get({"table": df})
    if ahead is not None:
        return ahead
    try:
        return _DIGESTED({"table": df}) if remember else _column_digests(df, pool)
    except pl.exceptions.PolarsError as error:
        raise WorldError(
            f"table {name!r} has a column that cannot be fingerprinted: {error}"
        ) from error


def fingerprint_tables(tables: Mapping[str, pl.DataFrame], salt: str) -> str:
    """SHA-256 hex digest of ``tables`` (any order of the mapping) and ``salt``.

    The same data gives the same digest in any process on any machine; a changed value,
    column name, dtype, column order, row order, table name or salt changes it.
    """
    hasher = hashlib.sha256()
    _frame(hasher, FORMAT_TAG)
    _frame(hasher, salt.encode())
    _frame(hasher, str(len(tables)).encode())
    big = any(df.height >= _PARALLEL_ROWS for df in tables.values())
    with ThreadPoolExecutor(max_workers=2) if big else nullcontext() as pool:
        for name in sorted(tables):
            df = tables[name]
            _frame(hasher, name.encode())
            _frame(hasher, str(df.height).encode())
            _frame(hasher, str(df.width).encode())
            for column, dtype in df.schema.items():
                _frame(hasher, column.encode())
                _frame(hasher, _dtype_name(dtype).encode())
            for digest in _table_digests(name, df, pool):
                _frame(hasher, digest)
    return hasher.hexdigest()
