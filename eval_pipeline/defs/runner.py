"""Running the main job on a real, persistent Dagster instance (for `evalp demo`)."""

from __future__ import annotations

import os
from dataclasses import dataclass

import dagster as dg

from eval_pipeline import paths
from eval_pipeline.defs.keys import MAIN_JOB


@dataclass(frozen=True)
class MainJobOutcome:
    run_id: str
    success: bool
    dagster_home: str
    materializations: dict[str, dict[str, object]]
    checks: dict[str, bool]


def run_main_job() -> MainJobOutcome:
    """Execute the main job in process on the instance in DAGSTER_HOME (created if needed)."""
    home = paths.prepared_dagster_home()
    os.environ["DAGSTER_HOME"] = str(home)
    from eval_pipeline.definitions import defs

    job = defs.resolve_job_def(MAIN_JOB)
    with dg.DagsterInstance.get() as instance:
        result = job.execute_in_process(
            instance=instance,
            raise_on_error=False,
            run_config={"loggers": {"console": {"config": {"log_level": "INFO"}}}},
        )
        materializations: dict[str, dict[str, object]] = {}
        for event in result.get_asset_materialization_events():
            materialization = event.step_materialization_data.materialization
            materializations[materialization.asset_key.to_user_string()] = {
                key: value.value for key, value in materialization.metadata.items()
            }
        checks = {
            evaluation.check_name: evaluation.passed
            for evaluation in result.get_asset_check_evaluations()
        }
        return MainJobOutcome(
            run_id=result.run_id,
            success=result.success,
            dagster_home=str(home),
            materializations=materializations,
            checks=checks,
        )
