"""fingerprint_tables: same data, same digest; any change, a different one."""

from __future__ import annotations

import hashlib
import os
import struct
import subprocess
import sys
from datetime import date

import polars as pl
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from eval_pipeline.world import fingerprint
from eval_pipeline.world.fingerprint import fingerprint_tables


def _tables() -> dict[str, pl.DataFrame]:
    return {
        "a": pl.DataFrame(
            {
                "id": [1, 2, 3],
                "name": ["x", None, "z"],
                "flag": [True, False, None],
                "day": [date(2025, 1, 31), date(2025, 2, 28), None],
            }
        ),
        "b": pl.DataFrame({"amount": [10, -20]}, schema={"amount": pl.Int64}),
    }


def test_same_data_same_digest_in_any_mapping_order() -> None:
    tables = _tables()
    reordered = {"b": tables["b"], "a": tables["a"]}
    assert fingerprint_tables(tables, "s") == fingerprint_tables(reordered, "s")
    assert len(fingerprint_tables(tables, "s")) == 64


@pytest.mark.parametrize(
    "change",
    [
        lambda t: t.update(a=t["a"].with_columns(pl.col("id").replace(2, 5))),
        lambda t: t.update(a=t["a"].with_columns(pl.col("name").fill_null(""))),
        lambda t: t.update(a=t["a"].rename({"name": "title"})),
        lambda t: t.update(a=t["a"].with_columns(pl.col("id").cast(pl.Int32))),
        lambda t: t.update(a=t["a"].select(["name", "id", "flag", "day"])),
        lambda t: t.update(a=t["a"].reverse()),
        lambda t: t.update(c=t.pop("b")),
        lambda t: t.update(b=t["b"].head(1)),
        lambda t: t.update(a=t["a"].with_columns(pl.col("flag").fill_null(False))),
        lambda t: t.pop("b"),
    ],
)
def test_any_change_changes_the_digest(change) -> None:  # type: ignore[no-untyped-def]
    tables = _tables()
    before = fingerprint_tables(tables, "s")
    change(tables)
    assert fingerprint_tables(tables, "s") != before


def test_salt_matters() -> None:
    assert fingerprint_tables(_tables(), "s") != fingerprint_tables(_tables(), "t")


def test_values_holding_the_separator_do_not_collide() -> None:
    one = {"t": pl.DataFrame({"s": ["a\x1fb", "c"]})}
    two = {"t": pl.DataFrame({"s": ["a", "b\x1fc"]})}
    three = {"t": pl.DataFrame({"s": ["a", "b", "c"]})}
    digests = {fingerprint_tables(t, "") for t in (one, two, three)}
    assert len(digests) == 3


def test_empty_and_null_differ() -> None:
    empty = {"t": pl.DataFrame({"s": [""]}, schema={"s": pl.String})}
    null = {"t": pl.DataFrame({"s": [None]}, schema={"s": pl.String})}
    none = {"t": pl.DataFrame({"s": []}, schema={"s": pl.String})}
    assert len({fingerprint_tables(t, "") for t in (empty, null, none)}) == 3


def test_stable_across_processes() -> None:
    code = (
        "import polars as pl; from datetime import date;"
        "from eval_pipeline.world.fingerprint import fingerprint_tables;"
        "from eval_pipeline_tests.world.test_fingerprint import _tables;"
        "print(fingerprint_tables(_tables(), 's'))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], check=True, capture_output=True, text=True
    ).stdout.strip()
    assert out == fingerprint_tables(_tables(), "s")


def _framed(data: bytes) -> bytes:
    return len(data).to_bytes(8, "little") + data


def _reference_column(values: list[object], dtype: pl.DataType) -> bytes:
    """Format v3 of one column, written from the module docstring with struct.pack."""
    present = [v is not None for v in values]
    lengths = b""
    if dtype == pl.String:
        form = b"text"
        texts = [str(v).encode() if v is not None else b"" for v in values]
        data = b"".join(texts)
        lengths = b"".join(struct.pack("<I", len(t)) for t in texts)
    else:
        form = b"fixed"
        if dtype == pl.Date:
            days = [(v - date(1970, 1, 1)).days if v is not None else 0 for v in values]  # type: ignore[operator]
            data = b"".join(struct.pack("<i", d) for d in days)
        elif dtype == pl.Boolean:
            data = bytes(1 if v else 0 for v in values)
        else:
            data = b"".join(struct.pack("<q", v if v is not None else 0) for v in values)
    if all(present):
        validity = b"-"
    else:
        bits = "".join("1" if p else "0" for p in present)
        bits += "0" * (-len(bits) % 8)
        validity = bytes(int(bits[i : i + 8], 2) for i in range(0, len(bits), 8))
    column = (
        _framed(form)
        + _framed(hashlib.sha256(data).digest())
        + _framed(hashlib.sha256(lengths).digest())
        + _framed(validity)
    )
    return hashlib.sha256(column).digest()


def _reference(tables: dict[str, pl.DataFrame], salt: str) -> str:
    out = _framed(b"eval-pipeline/fingerprint/v3") + _framed(salt.encode())
    out += _framed(str(len(tables)).encode())
    for name in sorted(tables):
        df = tables[name]
        out += _framed(name.encode()) + _framed(str(df.height).encode())
        out += _framed(str(df.width).encode())
        for column, dtype in df.schema.items():
            out += _framed(column.encode()) + _framed(str(dtype).encode())
        for column, dtype in df.schema.items():
            out += _framed(_reference_column(df[column].to_list(), dtype))
    return hashlib.sha256(out).hexdigest()


def test_the_digest_is_the_documented_bytes_not_text() -> None:
    """Format v3 hashes values as little-endian numbers and UTF-8 bytes with lengths (the
    text rendering of v2 built a string per value); an independent writing of the format
    gives the same digest."""
    assert fingerprint_tables(_tables(), "s") == _reference(_tables(), "s")


def test_the_digest_does_not_depend_on_chunks_or_slices(monkeypatch: pytest.MonkeyPatch) -> None:
    frame = pl.DataFrame({"n": list(range(10)), "s": [str(i) * (i % 3) for i in range(10)]})
    chunked = pl.concat([frame.head(3), frame.tail(7)], rechunk=False)
    assert chunked.n_chunks() == 2
    whole = fingerprint_tables({"t": frame}, "")
    assert fingerprint_tables({"t": chunked}, "") == whole
    monkeypatch.setattr(fingerprint, "SLICE_ROWS", 4)
    monkeypatch.setattr(fingerprint, "TEXT_SLICE_ROWS", 3)
    assert fingerprint_tables({"t": frame}, "") == whole


@given(
    values=st.lists(st.one_of(st.none(), st.text(max_size=6)), max_size=12),
    held_as=st.sampled_from(["text", "categorical", "enum"]),
    slice_rows=st.sampled_from([1, 3, 1 << 16]),
    split=st.integers(0, 12),
)
@example(values=["a", None, "", "\u00e9\U0001f600"], held_as="enum", slice_rows=3, split=1)
def test_a_text_column_hashes_its_documented_bytes_however_it_is_held(
    values: list[str | None], held_as: str, slice_rows: int, split: int
) -> None:
    """Text held as text, Categorical or Enum codes, in chunks, hashed a slice at a time:
    the bytes the format documents (nulls as empty text), written independently."""
    series = pl.Series("t", values, dtype=pl.String)
    if held_as == "categorical":
        series = series.cast(pl.Categorical)
    elif held_as == "enum":
        series = series.cast(pl.Enum(sorted({v for v in values if v is not None})))
    series = pl.concat([series.head(split), series.slice(split)], rechunk=False)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(fingerprint, "TEXT_SLICE_ROWS", slice_rows)
        digest = fingerprint._column_digest(series)
    assert digest == _reference_column(list(values), pl.String)


@given(
    used=st.lists(st.sampled_from(["ab", "\u00e9", "zz", "\u00fc", "\x00\x00", "ba"]), max_size=12),
    unused=st.lists(st.sampled_from(["qq", "\u00f1", "yx"]), max_size=2),
    slice_bytes=st.sampled_from([1, 2, 6, 1 << 20]),
    split=st.integers(0, 12),
)
@example(used=["ab", "\u00e9", "ab"], unused=["qq"], slice_bytes=2, split=1)
@example(used=["ab", "zz", "ab", "zz"], unused=[], slice_bytes=6, split=1)  # a part slice last
def test_an_enum_of_one_width_hashes_its_documented_bytes(
    used: list[str], unused: list[str], slice_bytes: int, split: int
) -> None:
    """An Enum whose categories are all two bytes wide (one- and two-byte characters mixed,
    some categories unused) is hashed from its codes a slice at a time: the bytes the format
    documents, as for any text."""
    categories = sorted(set(used) | set(unused))
    series = pl.Series("t", used, dtype=pl.Enum(categories))
    series = pl.concat([series.head(split), series.slice(split)], rechunk=False)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(fingerprint, "CODES_SLICE_BYTES", slice_bytes)
        digest = fingerprint._column_digest(series)
    assert digest == _reference_column(list(used), pl.String)


def test_tables_digested_ahead_give_the_fingerprint_they_give_hashed_at_once() -> None:
    """A caller may hash the columns before it knows the salt; the fingerprint is the same,
    and another frame (the same content changed) is hashed afresh, not served the digests
    of the one before."""
    tables = _tables()
    expected = _reference(tables, "s")
    fingerprint.digest_ahead(tables)
    assert fingerprint_tables(tables, "s") == expected
    changed = {**tables, "a": tables["a"].with_columns(pl.col("id") + 1)}
    assert fingerprint_tables(changed, "s") == _reference(changed, "s") != expected


_TEXT_PEAK = """
import sys
import polars as pl
from eval_pipeline.world.fingerprint import fingerprint_tables

def status_mb(field):
    with open("/proc/self/status") as status:
        line = next(line for line in status if line.startswith(field + ":"))
    return int(line.split()[1]) / 1024

# Two million rows of one 50-byte value: polars shares the value's bytes, so the column is
# small in memory while its text, as the fingerprint hashes it, is 100 MB.
frame = pl.DataFrame({"text": pl.repeat("n" * 50, 2_000_000, eager=True)})
if sys.argv[1] == "enum":  # held as codes, as the statement lines' text is
    frame = frame.with_columns(pl.col("text").cast(pl.Enum(["n" * 50])))
fingerprint_tables({"warm": frame.head(10)}, "")
with open("/proc/self/clear_refs", "w") as clear_refs:
    clear_refs.write("5")  # resets this process's high-water mark to what it holds now
before = status_mb("VmRSS")
fingerprint_tables({"t": frame}, "")
print(status_mb("VmHWM") - before)
"""


@pytest.mark.skipif(
    not os.access("/proc/self/clear_refs", os.W_OK), reason="needs Linux's /proc/self/clear_refs"
)
@pytest.mark.parametrize("held_as", ["text", "enum"])
def test_hashing_a_long_text_column_holds_only_a_slice_of_its_text(held_as: str) -> None:
    # At 10x the answer key's registry descriptions (800k rows) were the pipeline's memory
    # peak: a million rows of text were held three times over while hashed, and a column
    # held as codes was first made text whole.
    rise_mb = float(
        subprocess.run(
            [sys.executable, "-c", _TEXT_PEAK, held_as], check=True, capture_output=True, text=True
        ).stdout.strip()
    )
    assert rise_mb < 40, f"fingerprinting 100 MB of text raised the peak by {rise_mb:.0f} MB"
