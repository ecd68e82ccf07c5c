"""An artist's part of the whole world's ledgers is what the engine computes on that
artist's part of the world: the calculator tool computes the world once and answers every
artist from it."""

from __future__ import annotations

from pathlib import Path

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


def test_the_calculators_index_holds_each_artists_part_row_for_row() -> None:
    """`ledgers_by_artist` is `artist_part` for every artist at once: same rows, same order,
    same columns (an artist with no rows in a ledger gets an empty one)."""
    from eval_pipeline.world.label.toolbox import ledgers_by_artist

    world = dict(LabelWorld().generate(12, 0.05).tables)
    whole = compute_truth(world, None)
    index = ledgers_by_artist(whole, world["contracts"])
    assert set(index) == set(world["contracts"]["artist_id"].to_list())
    for artist_id, ledgers in index.items():
        part = artist_part(whole, world["contracts"], artist_id)
        for name in ARTIST_LEDGER_TABLES:
            assert ledgers[name].equals(part[name]), (artist_id, name)


def test_the_calculators_ledgers_are_computed_once_a_world_and_read_after(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first toolbox computes them beside the agent database; the next reads the same
    frames without running the engine or reading the world's tables (a quarter second of
    each product lane's first calculator call on the default world, with the lane's other
    calls waiting); a folder a killed run left half-written is redone."""
    from eval_pipeline.world.label import toolbox

    world = dict(LabelWorld().generate(12, 0.05).tables)
    agent_db = tmp_path / "world-abc" / "world.duckdb"
    agent_db.parent.mkdir()
    first = toolbox.calculator_ledgers(agent_db, lambda: world)
    (folder,) = agent_db.parent.glob(f"{toolbox.CALCULATOR_DIR}-*")

    def engine_must_not_run(*_args: object, **_kwargs: object) -> None:
        raise AssertionError("the engine ran again")

    def world_must_not_be_read() -> dict[str, object]:
        raise AssertionError("the world's tables were read again")

    monkeypatch.setattr(toolbox, "compute_truth", engine_must_not_run)
    again = toolbox.calculator_ledgers(agent_db, world_must_not_be_read)  # type: ignore[arg-type]
    assert set(again) == set(first) == set(ARTIST_LEDGER_TABLES)
    assert all(again[name].equals(first[name]) for name in first)
    monkeypatch.undo()
    (folder / toolbox.DONE).unlink()  # killed before it finished
    redone = toolbox.calculator_ledgers(agent_db, lambda: world)
    assert all(redone[name].equals(first[name]) for name in first)
    assert (folder / toolbox.DONE).is_file()
