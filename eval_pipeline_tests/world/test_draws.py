"""Every random draw of the label world has its own address: no two draws share one.

A draw is ``Stream(seed, name).u64(counter)``. Counters packed by hand (``10 + i``,
``20 + i``) reuse a draw as soon as ``i`` outgrows the gap between two packs; each entity
draws from a child stream of its own instead.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator

import pytest

from eval_pipeline.world.label import LabelWorld
from eval_pipeline.world.label.distributors import fx_frame
from eval_pipeline.world.label.roster import contract_dates
from eval_pipeline.world.rng import MASK64, Stream


@pytest.fixture
def drawn(monkeypatch: pytest.MonkeyPatch) -> Iterator[Counter[tuple[str, int]]]:
    """Every scalar draw's address (stream name, counter), counted."""
    addresses: Counter[tuple[str, int]] = Counter()
    u64 = Stream.u64

    def recorded(self: Stream, counter: int) -> int:
        addresses[(self.name, counter & MASK64)] += 1
        return u64(self, counter)

    monkeypatch.setattr(Stream, "u64", recorded)
    yield addresses


def test_a_world_draws_no_address_twice(drawn: Counter[tuple[str, int]]) -> None:
    """The catalog, the contracts' clauses, FX, the anomalies and the calibration: before
    each amended channel drew from its own stream, the two channels of an amendment that
    changed two drew the same numbers (26 shared addresses in the default catalog)."""
    LabelWorld().generate(20260101, 0.05)
    assert len(drawn) > 10_000
    assert [address for address, times in drawn.items() if times > 1] == []


def test_an_artist_with_many_contracts_draws_each_contract_apart(
    drawn: Counter[tuple[str, int]],
) -> None:
    """With the dates packed as ``10 + i`` and ``20 + i``, the 12th contract of an artist
    drew its length from the draw that set the 2nd one's gap."""
    starts, ends = contract_dates(Stream(5, "artist"), 12)
    assert [address for address, times in drawn.items() if times > 1] == []
    assert all(start < end for start, end in zip(starts, ends, strict=True))
    assert all(end < start for end, start in zip(ends, starts[1:], strict=False))
    # Each contract draws the same dates however many came before it.
    fewer = contract_dates(Stream(5, "artist"), 4)
    assert (starts[-4:], ends[-4:]) == fewer


def test_a_currency_walks_the_same_way_whichever_others_are_used() -> None:
    """FX drew from one stream with the currency's position in the list packed into the
    counter: a world without GBP had other yen rates."""
    full = fx_frame(20260101, ("USD", "EUR", "GBP", "JPY"))
    fewer = fx_frame(20260101, ("USD", "EUR", "JPY"))
    assert full.filter(full["currency"] != "GBP").equals(fewer)
