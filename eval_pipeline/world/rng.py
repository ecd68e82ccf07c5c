"""A counter-based random source that gives the same numbers in every process and machine.

Every random value in a generated world is ``splitmix64(key + counter * GOLDEN)``, where
``key`` is derived from the world seed and a stream name with SHA-256 and ``counter`` is
an integer the caller chooses (a row number, or a number built from an entity's identity).
The mixing function is pure 64-bit integer arithmetic, so the scalar face (Python ints)
and the vectorized face (polars ``UInt64`` expressions, which wrap on overflow) give the
same bits. No Python ``hash()``, no global state, no floating point, no wall clock.

Bounded draws use the multiply-shift map ``(u >> 32) * n >> 32``; its bias for the small
bounds used here (below 2**20) is under 2**-12 and, more to the point, it is exact
integer arithmetic that never depends on the platform.
"""

from __future__ import annotations

import hashlib
from bisect import bisect_right
from collections.abc import Sequence
from itertools import accumulate

import polars as pl

MASK64 = (1 << 64) - 1
GOLDEN = 0x9E3779B97F4A7C15
_MIX1 = 0xBF58476D1CE4E5B9
_MIX2 = 0x94D049BB133111EB
_TWO32 = 1 << 32


def stream_key(seed: int, stream: str) -> int:
    """A 64-bit key for one named stream of one seed (SHA-256, stable everywhere)."""
    digest = hashlib.sha256(f"eval-pipeline-rng:{seed}:{stream}".encode()).digest()
    return int.from_bytes(digest[:8], "little")


def _u64(value: int) -> pl.Expr:
    return pl.lit(value & MASK64, dtype=pl.UInt64)


def mix64(value: int) -> int:
    """The splitmix64 finalizer on one Python int (taken modulo 2**64)."""
    z = value & MASK64
    z = ((z ^ (z >> 30)) * _MIX1) & MASK64
    z = ((z ^ (z >> 27)) * _MIX2) & MASK64
    return z ^ (z >> 31)


class Cumulative:
    """Running totals of integer weights, for repeated weighted draws."""

    def __init__(self, weights: Sequence[int]) -> None:
        if not weights or any(weight < 0 for weight in weights) or sum(weights) <= 0:
            raise ValueError("weights must be non-negative with a positive total")
        self.totals = list(accumulate(weights))


class Stream:
    """One named random stream of a seed, addressable by counter (row number or entity id)."""

    def __init__(self, seed: int, name: str) -> None:
        self.seed = seed
        self.name = name
        self.key = stream_key(seed, name)

    def child(self, name: str) -> Stream:
        """A sub-stream, independent of this one."""
        return Stream(self.seed, f"{self.name}/{name}")

    # -- scalar face ---------------------------------------------------------------------

    def u64(self, counter: int) -> int:
        """The 64-bit value at ``counter``."""
        return mix64(self.key + (counter & MASK64) * GOLDEN)

    def below(self, counter: int, bound: int) -> int:
        """An integer in ``[0, bound)`` at ``counter``; ``bound`` must be in ``[1, 2**32)``."""
        if not 1 <= bound < _TWO32:
            raise ValueError(f"bound must be in [1, 2**32), got {bound}")
        return ((self.u64(counter) >> 32) * bound) >> 32

    def between(self, counter: int, low: int, high: int) -> int:
        """An integer in ``[low, high]`` (both inclusive) at ``counter``."""
        return low + self.below(counter, high - low + 1)

    def chance(self, counter: int, per_million: int) -> bool:
        """True with probability ``per_million / 1e6`` at ``counter``."""
        return self.below(counter, 1_000_000) < per_million

    def choice_index(self, counter: int, weights: Sequence[int] | Cumulative) -> int:
        """An index into ``weights`` drawn with probability proportional to its weight
        (pass a :class:`Cumulative` to draw many times from the same weights)."""
        cumulative = weights if isinstance(weights, Cumulative) else Cumulative(weights)
        return bisect_right(cumulative.totals, self.below(counter, cumulative.totals[-1]))

    def permutation(self, n: int, counter: int = 0) -> list[int]:
        """A permutation of ``range(n)`` (sort by a random key, ties by index)."""
        keys = [(self.u64(counter * 1_000_003 + index), index) for index in range(n)]
        return [index for _, index in sorted(keys)]

    # -- vectorized face -----------------------------------------------------------------

    def add_u64(self, frame: pl.DataFrame, counter: str, out: str) -> pl.DataFrame:
        """``frame`` with column ``out``: the 64-bit value at each row's ``counter`` column.

        Mixing runs one step per ``with_columns`` so each step reads a materialized column
        (a nested expression would repeat the counter subtree 2**3 times).
        """
        start = _u64(self.key) + pl.col(counter).cast(pl.UInt64) * _u64(GOLDEN)
        return _mix_into(frame.with_columns(start.alias(out)), out)


def _mix_into(frame: pl.DataFrame, column: str) -> pl.DataFrame:
    z = pl.col(column)
    frame = frame.with_columns((z.xor(z // _u64(1 << 30)) * _u64(_MIX1)).alias(column))
    frame = frame.with_columns((z.xor(z // _u64(1 << 27)) * _u64(_MIX2)).alias(column))
    return frame.with_columns(z.xor(z // _u64(1 << 31)).alias(column))


def high_below(u64: pl.Expr, bound: pl.Expr | int) -> pl.Expr:
    """An Int64 in ``[0, bound)`` from the high 32 bits of a UInt64 column."""
    bound_expr = bound if isinstance(bound, pl.Expr) else pl.lit(bound)
    high = u64 // _u64(_TWO32)
    return ((high * bound_expr.cast(pl.UInt64)) // _u64(_TWO32)).cast(pl.Int64)


def low_below(u64: pl.Expr, bound: pl.Expr | int) -> pl.Expr:
    """An Int64 in ``[0, bound)`` from the low 32 bits (independent of :func:`high_below`)."""
    bound_expr = bound if isinstance(bound, pl.Expr) else pl.lit(bound)
    low = u64 % _u64(_TWO32)
    return ((low * bound_expr.cast(pl.UInt64)) // _u64(_TWO32)).cast(pl.Int64)


def low_below_scalar(u64: int, bound: int) -> int:
    """The scalar face of :func:`low_below`."""
    return ((u64 & (_TWO32 - 1)) * bound) >> 32


def combine_into(frame: pl.DataFrame, out: str, *columns: str) -> pl.DataFrame:
    """``frame`` with ``out``: one UInt64 mixed from several integer columns (so nearby ids
    do not collide); equal to :func:`combine_scalar` on the same values."""
    frame = frame.with_columns(_u64(0).alias(out))
    for column in columns:
        frame = frame.with_columns(
            (pl.col(out).xor(pl.col(column).cast(pl.UInt64)) + _u64(GOLDEN)).alias(out)
        )
        frame = _mix_into(frame, out)
    return frame


def combine_scalar(*parts: int) -> int:
    """The scalar face of :func:`combine_into`."""
    acc = 0
    for part in parts:
        acc = mix64(((acc ^ (part & MASK64)) + GOLDEN) & MASK64)
    return acc
