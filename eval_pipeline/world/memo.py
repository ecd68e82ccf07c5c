"""Results remembered by the identity of the tables they were computed from.

A polars frame is immutable, so a function of some of a world's tables gives the same result
for the same frame objects. The generator, the answer key and the suite of one run hand one
another the same world, and each would otherwise recompute what the others already did
(scan the lines for the reconciliation rules, code the lines as integers). A memo holds the
last few results, each with weak references to the frames it was read from: a world read
back from storage is new frames, and is computed afresh; a result is let go as soon as one
of its frames is (a run that lets go of its world gets the memory back).

Frames that are the same but for a few rows can also share their memory
(:func:`sharing_rows`): the suite's views of the answer key under each misreading.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable, Mapping
from typing import Generic, TypeVar, cast

import polars as pl

T = TypeVar("T")


class ByTables(Generic[T]):
    """``compute(world)`` remembered by the identity of ``world[name]`` for ``names``."""

    def __init__(
        self,
        names: tuple[str, ...],
        compute: Callable[[Mapping[str, pl.DataFrame]], T],
        size: int = 2,
    ) -> None:
        self.names = names
        self.compute = compute
        self.size = size
        self._entries: list[tuple[tuple[weakref.ref[pl.DataFrame], ...], T]] = []
        # Reentrant: a frame collected while this thread holds the lock calls `_forget`.
        self._lock = threading.RLock()

    def _remembered(self, world: Mapping[str, pl.DataFrame]) -> tuple[bool, T | None]:
        frames = tuple(world[name] for name in self.names)
        with self._lock:
            for refs, result in self._entries:
                if all(ref() is frame for ref, frame in zip(refs, frames, strict=True)):
                    return True, result
        return False, None

    def get(self, world: Mapping[str, pl.DataFrame]) -> T | None:
        """The result remembered for these very frames, if any (nothing is computed)."""
        return self._remembered(world)[1]

    def __call__(self, world: Mapping[str, pl.DataFrame]) -> T:
        found, remembered = self._remembered(world)
        if found:
            return cast(T, remembered)
        result = self.compute(world)
        refs = tuple(weakref.ref(world[name], self._forget) for name in self.names)
        with self._lock:
            self._entries = [(refs, result), *self._entries][: self.size]
        return result

    def _forget(self, _gone: weakref.ref[pl.DataFrame]) -> None:
        """Drop every result one of whose frames was collected (it can never be served)."""
        with self._lock:
            self._entries = [
                entry for entry in self._entries if all(ref() is not None for ref in entry[0])
            ]

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()


class Parts:
    """Values computed once per distinct inputs (compared by identity) and settings.

    The suite computes the answer key under twenty readings of the rules; most readings
    leave most steps' inputs as they were (the same deals, terms or royalties), and a step
    whose inputs are the same objects under the same settings gives the same value. Kept
    values hold their inputs, so an input's identity is not reused while the memo lives.
    Safe to share between threads: of two threads computing one part, both get the value
    the first to finish kept.
    """

    def __init__(self) -> None:
        self._values: dict[tuple[object, ...], tuple[tuple[object, ...], object]] = {}
        self._lock = threading.Lock()

    def get(
        self,
        step: str,
        inputs: tuple[object, ...],
        settings: tuple[object, ...],
        compute: Callable[[], T],
    ) -> T:
        key = (step, tuple(id(value) for value in inputs), settings)
        with self._lock:
            if key in self._values:
                return self._values[key][1]  # type: ignore[return-value]
        value = compute()
        with self._lock:
            return self._values.setdefault(key, (inputs, value))[1]  # type: ignore[return-value]


MAX_SHARED_PIECES = 1_000
"""More differing rows than this and a shared frame would be mostly small pieces (see
:func:`sharing_rows`)."""


def sharing_rows(base: pl.DataFrame, target: pl.DataFrame, key: str) -> pl.DataFrame:
    """``target`` (equal to it, row for row), made of zero-copy slices of ``base`` wherever
    the two agree, and ``target``'s own rows where they differ.

    Both must be sorted by ``key``, unique in it, with the same columns. Frames that differ
    in a few rows then hold one copy of the rows they share: the suite keeps a registry per
    misreading of the flagging rules, most of them the answer key's but for a dozen lines,
    and at 10x each is 800,000 rows. Where they differ in more rows than
    :data:`MAX_SHARED_PIECES` allows, ``target`` itself is returned.
    """
    if base.columns != target.columns:
        raise ValueError(f"sharing_rows needs the same columns: {base.columns} vs {target.columns}")
    for name, frame in (("base", base), ("target", target)):
        keys = frame.get_column(key)
        increasing = len(keys) < 2 or (keys.slice(1) > keys.slice(0, len(keys) - 1)).all()
        if keys.null_count() or not increasing:
            raise ValueError(f"sharing_rows needs {name} sorted by {key!r} and unique in it")
    # Rows are told apart by their hashes (joining on every column cost half a second at
    # 10x); a collision could only hide a difference, which the check at the end catches.
    ours, theirs = base.hash_rows(), target.hash_rows()
    dropped = pl.arg_where(~ours.is_in(theirs.implode()), eager=True)
    added = target.filter(~theirs.is_in(ours.implode()))
    if len(dropped) + added.height > MAX_SHARED_PIECES:
        return target
    if len(dropped) == 0 and added.height == 0 and base.equals(target):
        return base
    shared = _spliced(base, key, dropped.to_list(), added)
    if shared is None:
        return target  # Every row of the base dropped and none added: nothing to share.
    return shared if shared.equals(target) else target


def spliced_rows(
    base: pl.DataFrame, key: str, replaced: pl.Series, rows: pl.DataFrame
) -> pl.DataFrame:
    """``base`` (sorted by ``key``, unique in it) with the rows of the keys ``replaced``
    taken out and ``rows`` (keys among them, sorted) put in their places: zero-copy slices
    of ``base`` between them, as :func:`sharing_rows` makes, for a caller that knows which
    rows changed without comparing every row."""
    dropped = pl.arg_where(base.get_column(key).is_in(replaced.implode()), eager=True)
    shared = _spliced(base, key, dropped.to_list(), rows)
    return rows if shared is None else shared


def _spliced(
    base: pl.DataFrame, key: str, dropped: list[int], added: pl.DataFrame
) -> pl.DataFrame | None:
    """``base`` without the rows at positions ``dropped`` and with ``added`` inserted in key
    order, made of slices of ``base``; None when nothing of ``base`` is left."""
    inserted_at = base.get_column(key).search_sorted(added.get_column(key), side="left")
    # (position in base, 0 = insert added row i before it | 1 = drop it, i)
    events = sorted(
        [(int(at), 0, i) for i, at in enumerate(inserted_at.to_list())]
        + [(int(at), 1, i) for i, at in enumerate(dropped)]
    )
    pieces: list[pl.DataFrame] = []
    cursor = 0
    for at, kind, i in events:
        if at > cursor:
            pieces.append(base.slice(cursor, at - cursor))
            cursor = at
        if kind == 0:
            pieces.append(added.slice(i, 1))
        else:
            cursor = at + 1
    if cursor < base.height:
        pieces.append(base.slice(cursor))
    if not pieces:
        return None
    return pl.concat(pieces, rechunk=False)
