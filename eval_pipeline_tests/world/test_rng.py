"""The counter-based random source: scalar and vectorized faces give the same numbers."""

from __future__ import annotations

import polars as pl

from eval_pipeline.world.rng import (
    Stream,
    combine_into,
    combine_scalar,
    high_below,
    low_below,
    low_below_scalar,
    stream_key,
)


def test_stream_key_is_pinned() -> None:
    # A change here changes every generated world: bump the generator version with it.
    assert stream_key(1, "x") != stream_key(2, "x")
    assert Stream(7, "pin").u64(0) == 0x7F4DF51944A4FE2C


def test_scalar_and_frame_faces_agree() -> None:
    stream = Stream(42, "test")
    counters = [0, 1, 2, 3, 10**6, 2**40 + 5]
    frame = stream.add_u64(pl.DataFrame({"c": counters}), "c", "u")
    assert frame["u"].to_list() == [stream.u64(c) for c in counters]
    bounded = frame.select(hi=high_below(pl.col("u"), 1_000), lo=low_below(pl.col("u"), 97))
    assert bounded["hi"].to_list() == [stream.below(c, 1_000) for c in counters]
    assert bounded["lo"].to_list() == [low_below_scalar(stream.u64(c), 97) for c in counters]
    combined = combine_into(pl.DataFrame({"a": [1, 2], "b": [3, 4]}), "k", "a", "b")
    assert combined["k"].to_list() == [combine_scalar(1, 3), combine_scalar(2, 4)]


def test_draws_are_in_range_and_spread() -> None:
    stream = Stream(1, "spread")
    draws = [stream.below(i, 10) for i in range(5_000)]
    assert set(draws) == set(range(10))
    assert all(400 < draws.count(v) < 600 for v in range(10))
    assert stream.choice_index(3, [0, 0, 5]) == 2
    assert sorted(stream.permutation(50)) == list(range(50))
