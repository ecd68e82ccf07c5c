"""fingerprint_tables: same data, same digest; any change, a different one."""

from __future__ import annotations

import subprocess
import sys
from datetime import date

import polars as pl
import pytest

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
