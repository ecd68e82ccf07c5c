"""Resources for model calls: the simulated provider's lifecycle and the call settings."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING

import dagster as dg

from eval_pipeline import paths
from eval_pipeline.sim import SIM_API_KEY

if TYPE_CHECKING:
    from eval_pipeline.providers.budget import BudgetGate
    from eval_pipeline.providers.call_slots import RunSlots
    from eval_pipeline.providers.config import ModelConfig
    from eval_pipeline.providers.harness import CallSession
    from eval_pipeline.scoring.grading import JudgeAsker, JudgeItems
    from eval_pipeline.scoring.judge import Judge
    from eval_pipeline.scoring.score import JudgeVerdict
    from eval_pipeline.sim.process import SimHandle

# The SDKs, the call harness and the simulated provider are imported by the steps that call
# models (in the methods below), not when the definitions load.


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


def run_slots(instance: dg.DagsterInstance) -> RunSlots:
    """The run's calls in flight: when every run of the instance runs on this machine (the
    default run launcher, or in process), a provider's whole `max_in_flight` is one pool
    for all of them (`call_slots.MachineSlots`, in the instance's folder); elsewhere (a
    launcher that may start runs on other machines) each run keeps its share."""
    from eval_pipeline.providers.call_slots import RunSlots

    local = instance.is_ephemeral or isinstance(instance.run_launcher, dg.DefaultRunLauncher)
    root = instance.root_directory
    if local and root:
        return RunSlots(machine=paths.call_slots_dir(Path(root)))
    return RunSlots(share=True)


@contextmanager
def model_session(
    sim: SimulatedProvider,
    calls: ModelCallSettings,
    *,
    run_id: str,
    configs: Mapping[str, ModelConfig],
    slots: RunSlots | None = None,
    server: SimHandle | None = None,
) -> Iterator[CallSession]:
    """A call session for `configs` journaling under runs/<run_id>/, with the simulated
    provider running (and logging every request it gets) while any of them is simulated:
    a tenant of `server` when given (`SimulatedProvider.serving_run`), else a server of its
    own; `slots` are the run's calls in flight, shared with the run's other sessions."""
    from eval_pipeline.providers.envelope_store import JOURNAL_NAME
    from eval_pipeline.sim.process import SIM_REQUEST_LOG, running_tenant
    from eval_pipeline.sim.sessions import StartSim, session_for

    run_dir = paths.runs_dir() / run_id
    log = run_dir / SIM_REQUEST_LOG
    start_sim: StartSim = (
        (lambda: sim.running(request_log=log))
        if server is None
        else (lambda: running_tenant(server, run_id, request_log=log))
    )
    with session_for(
        configs,
        run_id=run_id,
        journal=run_dir / JOURNAL_NAME,
        budget=calls.budget(),
        start_sim=start_sim,
        sim_api_key=sim.api_key,
        slots=slots,
    ) as session:
        yield session


def judge_asker(
    sim: SimulatedProvider,
    calls: ModelCallSettings,
    judge: Judge,
    run_id: str,
    server: SimHandle | None = None,
    slots: RunSlots | None = None,
) -> JudgeAsker:
    """Asks `judge` in a session of its own journaling under runs/<run_id>/ (opened only
    when there is something to ask; a tenant of `server` when given; its calls in flight
    among the run's `slots` when given)."""
    from eval_pipeline.providers.config import scan_model_configs
    from eval_pipeline.scoring.judge import judge_in_session

    def ask(items: JudgeItems) -> Mapping[str, JudgeVerdict]:
        config = scan_model_configs().require([judge.model])[judge.model]
        with model_session(
            sim, calls, run_id=run_id, configs={judge.model: config}, server=server, slots=slots
        ) as session:
            return judge_in_session(session, config, judge, items)

    return ask
