"""The memo holds a result only while the frames it was computed from live."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Mapping

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from eval_pipeline.world.memo import ByTables, sharing_rows


class Result:
    """A result a weak reference can watch."""

    def __init__(self, rows: int) -> None:
        self.rows = rows


def _count_rows(world: Mapping[str, pl.DataFrame]) -> Result:
    return Result(world["lines"].height)


def test_a_result_is_served_again_for_the_same_frame_and_computed_for_another() -> None:
    calls: list[int] = []

    def compute(world: Mapping[str, pl.DataFrame]) -> Result:
        calls.append(1)
        return _count_rows(world)

    memo = ByTables(("lines",), compute)
    frame = pl.DataFrame({"x": [1, 2, 3]})
    first = memo({"lines": frame})
    assert memo({"lines": frame}) is first
    assert memo({"lines": pl.DataFrame({"x": [1, 2, 3]})}) is not first
    assert len(calls) == 2


def test_a_result_is_let_go_once_a_frame_it_was_computed_from_is_gone() -> None:
    # A run lets go of its world after the fixtures stage; the memo must not keep what it
    # computed from that world (at 10x scale, hundreds of MB) until two newer worlds
    # push it out.
    memo = ByTables(("lines", "other"), _count_rows)
    lines = pl.DataFrame({"x": list(range(10))})
    other = pl.DataFrame({"y": [1]})
    result = weakref.ref(memo({"lines": lines, "other": other}))
    assert result() is not None
    del lines
    gc.collect()
    assert result() is None
    assert memo({"lines": pl.DataFrame({"x": [1]}), "other": other}).rows == 1


# -- sharing_rows -------------------------------------------------------------------------

_ROW = st.tuples(
    st.one_of(st.none(), st.sampled_from(["dup", "twin", "return", "ünï"])),
    st.one_of(st.none(), st.booleans()),
)


@st.composite
def _base_and_edits(draw: st.DrawFn) -> tuple[pl.DataFrame, pl.DataFrame, int]:
    """A frame sorted by a unique key, and a copy with rows dropped, inserted and changed."""
    keys = sorted(draw(st.sets(st.integers(0, 400), max_size=60)))
    rows = [draw(_ROW) for _ in keys]
    base = pl.DataFrame(
        {"id": keys, "kind": [r[0] for r in rows], "flag": [r[1] for r in rows]},
        schema={"id": pl.Int64, "kind": pl.String, "flag": pl.Boolean},
    )
    target_rows = dict(zip(keys, rows, strict=True))
    edits = 0
    for key in draw(st.lists(st.integers(0, 400), max_size=8)):
        action = draw(st.sampled_from(["drop", "put"]))
        if action == "drop" and key in target_rows:
            del target_rows[key]
            edits += 1
        elif action == "put":
            target_rows[key] = draw(_ROW)
            edits += 1
    ordered = sorted(target_rows.items())
    target = pl.DataFrame(
        {
            "id": [k for k, _ in ordered],
            "kind": [r[0] for _, r in ordered],
            "flag": [r[1] for _, r in ordered],
        },
        schema=base.schema,
    )
    return base, target, edits


@given(_base_and_edits())
@settings(max_examples=300, deadline=None)
def test_a_shared_frame_equals_its_target_and_is_pieced_from_the_base(
    case: tuple[pl.DataFrame, pl.DataFrame, int],
) -> None:
    base, target, edits = case
    shared = sharing_rows(base, target, "id")
    assert shared.equals(target) and shared.schema == target.schema
    # At most a slice of the base between each two edits, and each edit's own row.
    assert shared.n_chunks() <= 2 * edits + 1


def test_a_frame_differing_in_a_few_rows_holds_slices_of_the_base() -> None:
    base = pl.DataFrame({"id": list(range(10_000)), "kind": ["borderline"] * 10_000})
    target = base.filter(pl.col("id") != 5_000).with_columns(
        kind=pl.when(pl.col("id") == 7_000).then(pl.lit("flagged")).otherwise("kind")
    )
    shared = sharing_rows(base, target, "id")
    assert shared.equals(target)
    # base[:5000], base[5001:7000], the changed row, base[7001:]: no copy of the rest.
    assert [len(chunk) for chunk in shared.get_column("id").get_chunks()] == [
        5_000,
        1_999,
        1,
        2_999,
    ]
    assert sharing_rows(base, base.clone(), "id") is base


def test_frames_sharing_cannot_be_pieced_from_are_refused_by_name() -> None:
    base = pl.DataFrame({"id": [1, 2, 3], "kind": ["a", "b", "c"]})
    with pytest.raises(ValueError, match="target sorted by 'id' and unique"):
        sharing_rows(base, pl.DataFrame({"id": [2, 1], "kind": ["a", "b"]}), "id")
    with pytest.raises(ValueError, match="base sorted by 'id' and unique"):
        sharing_rows(base.with_columns(id=pl.lit(1)), base, "id")
    with pytest.raises(ValueError, match="same columns"):
        sharing_rows(base, base.rename({"kind": "note"}), "id")


def test_many_differences_give_the_target_itself() -> None:
    base = pl.DataFrame({"id": list(range(5_000)), "kind": ["x"] * 5_000})
    target = base.with_columns(kind=pl.lit("y"))
    assert sharing_rows(base, target, "id") is target


def test_an_empty_target_is_given_back_as_it_is() -> None:
    # Found by the hypothesis test above in a CI run: every row of the base dropped left
    # nothing to piece together, and concatenating no pieces raised.
    base = pl.DataFrame({"id": [0], "kind": [None]}, schema={"id": pl.Int64, "kind": pl.String})
    target = base.clear()
    shared = sharing_rows(base, target, "id")
    assert shared.equals(target) and shared.schema == target.schema
