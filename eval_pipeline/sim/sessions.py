"""A call session for a set of model configs, with the simulated provider running while
any of them is simulated: one way to open one, for the lanes, the judge and the CLI. It
lives with the simulator: the model-call layer (`providers/`) knows nothing of it."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager, nullcontext
from pathlib import Path

from eval_pipeline.crashpoints import crash_point
from eval_pipeline.project_configs import load_price_book, scan_model_configs
from eval_pipeline.providers.budget import BudgetGate
from eval_pipeline.providers.call_slots import RunSlots
from eval_pipeline.providers.config import SIMULATED, ModelConfig, configured_keys
from eval_pipeline.providers.harness import CallSession
from eval_pipeline.sim import SIM_API_KEY as SIM_API_KEY
from eval_pipeline.sim.process import SimHandle, SimTenant, running_sim

StartSim = Callable[[], AbstractContextManager[SimHandle | SimTenant]]
"""A simulated provider for a session's block: a server of its own, or a tenant of one
shared with the run's other sessions."""


def simulated(configs: Mapping[str, ModelConfig]) -> dict[str, ModelConfig]:
    return {name: config for name, config in configs.items() if config.provider == SIMULATED}


@contextmanager
def session_for(
    configs: Mapping[str, ModelConfig],
    *,
    run_id: str,
    journal: Path,
    budget: BudgetGate | None = None,
    start_sim: StartSim | None = None,
    sim_api_key: str = SIM_API_KEY,
    slots: RunSlots | None = None,
) -> Iterator[CallSession]:
    """A new (not yet entered) session journaling to `journal`; simulated configs point at
    a simulated provider started by `start_sim` (default: one logging nothing) and stopped
    when the block ends. Real configs read their keys from the environment as usual.

    The session redacts, from its start, the key of every config in `configs` and of every
    config in the models folder (the judge's among them) whose key variable is set: any
    reply may echo any key the process holds, not only its own client's."""
    secrets = configured_keys([*configs.values(), *scan_model_configs().configs.values()])
    fake = simulated(configs)
    starting: AbstractContextManager[SimHandle | SimTenant | None] = (
        (start_sim or running_sim)() if fake else nullcontext()
    )
    with starting as handle:
        yield CallSession(
            price_book=load_price_book(),
            run_id=run_id,
            journal_path=journal,
            budget=budget,
            base_urls={name: handle.base_url_for(config.api) for name, config in fake.items()}
            if handle is not None
            else {},
            api_keys={name: sim_api_key for name in fake},
            secrets=secrets,
            slots=slots,
            crash_point=crash_point,
        )
