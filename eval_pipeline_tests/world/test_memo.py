"""The memo holds a result only while the frames it was computed from live."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Mapping

import polars as pl

from eval_pipeline.world.memo import ByTables


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
