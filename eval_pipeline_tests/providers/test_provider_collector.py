"""The collector's young threshold is raised while call sessions are open, and restored."""

from __future__ import annotations

import asyncio
import gc
from collections.abc import Iterator
from pathlib import Path

import pytest

from eval_pipeline.project_configs import load_price_book
from eval_pipeline.providers.collector import YoungCollections
from eval_pipeline.providers.harness import CallSession


@pytest.fixture
def default_thresholds() -> Iterator[tuple[int, int, int]]:
    saved = gc.get_threshold()
    gc.set_threshold(700, 10, 10)
    yield gc.get_threshold()
    gc.set_threshold(*saved)


def test_a_session_raises_the_young_threshold_while_open_and_restores_it(
    tmp_path: Path, default_thresholds: tuple[int, int, int]
) -> None:
    seen: list[tuple[int, int, int]] = []

    async def run() -> None:
        async with CallSession(
            price_book=load_price_book(), run_id="gc", journal_path=tmp_path / "a.jsonl"
        ):
            seen.append(gc.get_threshold())
            async with CallSession(
                price_book=load_price_book(), run_id="gc-inner", journal_path=tmp_path / "b.jsonl"
            ):
                seen.append(gc.get_threshold())
            seen.append(gc.get_threshold())

    asyncio.run(run())
    assert [t[0] for t in seen] == [20_000, 20_000, 20_000]
    assert all(t[1:] == (10, 10) for t in seen)
    assert gc.get_threshold() == default_thresholds


def test_a_failing_session_still_restores_the_threshold(
    tmp_path: Path, default_thresholds: tuple[int, int, int]
) -> None:
    async def run() -> None:
        async with CallSession(
            price_book=load_price_book(), run_id="gc", journal_path=tmp_path / "a.jsonl"
        ):
            raise ValueError("a lane failed")

    with pytest.raises(ValueError, match="a lane failed"):
        asyncio.run(run())
    assert gc.get_threshold() == default_thresholds


def test_collection_left_off_or_set_higher_by_the_caller_is_left_alone() -> None:
    saved = gc.get_threshold()
    try:
        for chosen in ((0, 10, 10), (50_000, 10, 10)):
            gc.set_threshold(*chosen)
            young = YoungCollections(threshold=20_000)
            young.enter()
            assert gc.get_threshold() == chosen
            young.exit()
            assert gc.get_threshold() == chosen
    finally:
        gc.set_threshold(*saved)


def test_restoring_more_often_than_raising_is_an_error() -> None:
    with pytest.raises(RuntimeError, match="more often than raised"):
        YoungCollections().exit()
