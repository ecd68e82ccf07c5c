"""Every resource the definitions use, in one place: where the warehouse, configs and
fixtures live for a run, the simulated provider's lifecycle, how model calls are made, and
the MLflow tracking store."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING, Any

import dagster as dg
from pydantic import PrivateAttr

from eval_pipeline import paths
from eval_pipeline.sim import SIM_API_KEY

if TYPE_CHECKING:
    import duckdb
    from mlflow import MlflowClient

    from eval_pipeline.providers.budget import BudgetGate
    from eval_pipeline.sim.process import SimHandle
    from eval_pipeline.tracking.mlflow_store import TrackingStore
    from eval_pipeline.world_stages import WorldHandOff

# The SDKs, the call harness, the simulated provider and MLflow are imported by the steps
# that use them (in the methods below), not when the definitions load.


class WarehouseResource(dg.ConfigurableResource):  # type: ignore[type-arg]
    """The DuckDB warehouse file. One writer at a time: runs on one file are serialized."""

    path: str
    _hand_off: Any = PrivateAttr(default=None)  # a WorldHandOff, made on first use

    @property
    def hand_off(self) -> WorldHandOff:
        """What one stage of this run hands the next (resources live once per run with the
        in-process executor), so the world is read back once per run, not per asset."""
        from eval_pipeline.world_stages import WorldHandOff

        if self._hand_off is None:
            self._hand_off = WorldHandOff()
        hand_off: WorldHandOff = self._hand_off
        return hand_off

    @contextmanager
    def connection(self) -> Iterator[duckdb.DuckDBPyConnection]:
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


SIM_LATENCY_ENV = "EVALP_SIM_LATENCY_MS"
"""The simulated provider's delay before each reply, in ms (default 0): lanes at a real
model's latency, for benchmarks (bench/sweep_scale.py). It changes no reply."""


def sim_latency_ms() -> int:
    """`EVALP_SIM_LATENCY_MS`, refused unless a whole number of ms from 0 to 600,000."""
    from eval_pipeline.errors import ConfigError

    text = os.environ.get(SIM_LATENCY_ENV, "").strip()
    if not text:
        return 0
    if not text.isdigit() or int(text) > 600_000:
        raise ConfigError(
            f"{SIM_LATENCY_ENV}={text!r}: need a whole number of milliseconds from 0 to 600000"
        )
    return int(text)


class SimulatedProvider(dg.ConfigurableResource):  # type: ignore[type-arg]
    """The project's simulated provider, started by the steps that call it and stopped when
    they end. Its key is a placeholder, not a secret: the server ignores keys."""

    seed: int = 0
    latency_ms: int = 0
    profile_options_json: str = ""
    api_key: str = SIM_API_KEY

    @contextmanager
    def running(
        self,
        *,
        request_log: Path | None = None,
        profile_options: Mapping[str, object] | None = None,
        allow_profile_errors: bool = False,
    ) -> Iterator[SimHandle]:
        from eval_pipeline.sim.process import running_sim

        options = dict(json.loads(self.profile_options_json or "{}"))
        options.update(profile_options or {})
        with running_sim(
            seed=self.seed,
            latency_ms=self.latency_ms,
            profile_options=options,
            request_log=request_log,
            allow_profile_errors=allow_profile_errors,
        ) as handle:
            yield handle

    @contextmanager
    def serving_run(self) -> Iterator[SimHandle]:
        """One server for a run's call sessions, each a tenant of it (`model_session`'s
        `server`): a run's lanes and its judge share a process, not a state. Each tenant
        checks its own profile errors when its session ends, as a server of its own did."""
        with self.running(allow_profile_errors=True) as server:
            yield server


class ModelCallSettings(dg.ConfigurableResource):  # type: ignore[type-arg]
    """How a step's model calls are made: an optional budget cap (USD, per call session:
    each lane of a partition, the judge of a step). Real
    providers' keys come from the environment variables their model configs name; nothing
    here holds a secret."""

    budget_usd: str = ""

    def budget(self) -> BudgetGate | None:
        from eval_pipeline.providers.budget import BudgetGate

        return BudgetGate(Decimal(self.budget_usd)) if self.budget_usd else None


class MlflowTracking(dg.ConfigurableResource):  # type: ignore[type-arg]
    """Where runs are logged: empty `tracking_uri` means EVALP_MLFLOW_URI, else the
    embedded SQLite store under var/mlflow/."""

    tracking_uri: str = ""
    _client: MlflowClient | None = PrivateAttr(default=None)

    def store(self) -> TrackingStore:
        from eval_pipeline.tracking.mlflow_store import default_store

        return default_store(self.tracking_uri)

    def client(self) -> MlflowClient:
        """The step's one client on the store, opened on first use (raises TrackingError
        naming the URI when the store cannot be reached)."""
        from eval_pipeline.tracking.mlflow_store import open_client

        if self._client is None:
            self._client = open_client(self.store())
        return self._client


def default_resources() -> dict[str, object]:
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
