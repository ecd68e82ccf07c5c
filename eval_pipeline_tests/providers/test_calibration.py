"""The calibration's two wire formats run at once; one that fails stops the other."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from eval_pipeline.providers import calibration
from eval_pipeline.providers.calibration import PLANTED_CONFIGS, calibrate_planted_configs


class PlannedError(Exception):
    pass


def test_a_format_that_fails_cancels_the_other_and_its_error_goes_up(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The session closes after this returns: no call of the other format may still run."""
    first, second = PLANTED_CONFIGS
    cancelled: list[str] = []

    async def fake(session: Any, config: Any) -> Any:
        if config == first:
            await asyncio.sleep(0.01)
            raise PlannedError(first)
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            cancelled.append(second)
            raise
        return None

    monkeypatch.setattr(calibration, "calibrate_planted", fake)
    configs: dict[str, Any] = {name: name for name in PLANTED_CONFIGS}

    async def run() -> None:
        with pytest.raises(PlannedError):
            await asyncio.wait_for(calibrate_planted_configs(None, configs), timeout=10)  # type: ignore[arg-type]
        # Here, while the loop still runs (closing it would cancel what is left anyway).
        assert cancelled == [second]

    asyncio.run(run())
