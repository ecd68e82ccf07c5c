"""Model-call sessions for a Dagster step: the run's calls in flight, a session with the
simulated provider running beside it, and the judge asked in a session of its own."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import dagster as dg

from eval_pipeline import paths
from eval_pipeline.defs.resources import ModelCallSettings, SimulatedProvider

if TYPE_CHECKING:
    from eval_pipeline.providers.call_slots import RunSlots
    from eval_pipeline.providers.config import ModelConfig
    from eval_pipeline.providers.harness import CallSession
    from eval_pipeline.scoring.grading import JudgeAsker, JudgeItems
    from eval_pipeline.scoring.judge import Judge
    from eval_pipeline.scoring.score import JudgeVerdict
    from eval_pipeline.sim.process import SimHandle


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
    from eval_pipeline.providers.envelope import JOURNAL_NAME
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
    from eval_pipeline.project_configs import scan_model_configs
    from eval_pipeline.scoring.judge import judge_in_session

    def ask(items: JudgeItems) -> Mapping[str, JudgeVerdict]:
        config = scan_model_configs().require([judge.model])[judge.model]
        with model_session(
            sim, calls, run_id=run_id, configs={judge.model: config}, server=server, slots=slots
        ) as session:
            return judge_in_session(session, config, judge, items)

    return ask
