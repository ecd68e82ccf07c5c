"""Resources: where the warehouse, configs and fixtures live for a run."""

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import dagster as dg
from pydantic import PrivateAttr

from eval_pipeline import paths

if TYPE_CHECKING:
    import duckdb

    from eval_pipeline.world_stages import WorldHandOff


class WarehouseResource(dg.ConfigurableResource):  # type: ignore[type-arg]
    """The DuckDB warehouse file. One writer at a time: runs on one file are serialized."""

    path: str
    _hand_off: Any = PrivateAttr(default=None)  # a WorldHandOff, made on first use

    @property
    def hand_off(self) -> "WorldHandOff":
        """What one stage of this run hands the next (resources live once per run with the
        in-process executor), so the world is read back once per run, not per asset."""
        from eval_pipeline.world_stages import WorldHandOff

        if self._hand_off is None:
            self._hand_off = WorldHandOff()
        hand_off: WorldHandOff = self._hand_off
        return hand_off

    @contextmanager
    def connection(self) -> "Iterator[duckdb.DuckDBPyConnection]":
        from eval_pipeline.warehouse import connect_when_free

        conn = connect_when_free(Path(self.path))
        try:
            yield conn
        finally:
            conn.close()


class ProjectSettings(dg.ConfigurableResource):  # type: ignore[type-arg]
    """Which world config to build and where frozen fixture sets go."""

    world_config_path: str
    fixtures_root: str


def default_resources() -> dict[str, object]:
    from eval_pipeline.defs.lane_resources import (
        ModelCallSettings,
        SimulatedProvider,
        sim_latency_ms,
    )
    from eval_pipeline.defs.tracking_assets import MlflowTracking

    return {
        "tracking": MlflowTracking(),
        "sim": SimulatedProvider(latency_ms=sim_latency_ms()),
        "calls": ModelCallSettings(),
        "warehouse": WarehouseResource(path=str(paths.warehouse_path())),
        "settings": ProjectSettings(
            world_config_path=str(paths.default_world_config()),
            fixtures_root=str(paths.fixtures_root()),
        ),
    }
