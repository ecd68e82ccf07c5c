"""An artist's part of the whole world's ledgers is what the engine computes on that
artist's part of the world: the calculator tool computes the world once and answers every
artist from it."""

from __future__ import annotations

import polars as pl
import pytest

from eval_pipeline.world.label import LabelWorld
from eval_pipeline.world.label.truth import (
    ARTIST_LEDGER_TABLES,
    artist_part,
    compute_truth,
    subset_world,
)

SORT_KEYS = {
    "artist_ledger": ["period"],
    "account_ledger": ["account_id", "period"],
    "contract_terms": ["contract_id", "channel", "period"],
    "track_period_royalties": ["isrc", "contract_id", "period", "channel"],
}


@pytest.mark.parametrize(("seed", "scale", "every"), [(12, 0.05, 3), (7, 0.2, 5)])
def test_every_artists_part_of_the_world_ledgers_equals_the_ledgers_of_their_part(
    seed: int, scale: float, every: int
) -> None:
    """Every `every`-th artist (an engine run on one artist's part costs about 40 ms)."""
    world = dict(LabelWorld().generate(seed, scale).tables)
    whole = compute_truth(world, None)
    artists = world["artists"]["artist_id"].to_list()[::every]
    assert len(artists) >= 30
    for artist_id in artists:
        part = artist_part(whole, world["contracts"], artist_id)
        alone = compute_truth(subset_world(world, {artist_id}), None)
        assert set(part) == set(ARTIST_LEDGER_TABLES)
        for name in ARTIST_LEDGER_TABLES:
            expected = alone[name]
            if "artist_id" in expected.columns:
                expected = expected.filter(pl.col("artist_id") == artist_id)
            keys = SORT_KEYS[name]
            got = part[name].sort(keys)
            assert got.equals(expected.select(got.columns).sort(keys)), (artist_id, name)
