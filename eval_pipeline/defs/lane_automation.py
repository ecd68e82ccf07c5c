"""When lanes run by themselves: a sensor that adds a model's partitions when its config
appears, and the nightly schedule that requests every partition of the sweep once a night."""

from __future__ import annotations

import dagster as dg

from eval_pipeline.defs.keys import (
    LANES_JOB,
    MODEL_CONFIGS_SENSOR,
    MODELS_PARTITIONS,
    NIGHTLY_SCHEDULE,
    PROVIDER_TAG,
)
from eval_pipeline.defs.lane_assets import model_partitions
from eval_pipeline.lanes.sweep_config import SweepConfig, load_sweep_config
from eval_pipeline.project_configs import scan_model_configs


def _partition(model: str, seed: int) -> dg.MultiPartitionKey:
    return dg.MultiPartitionKey({"model": model, "seed": str(seed)})


def sweep_run_requests(
    sweep: SweepConfig, models: list[str], providers: dict[str, str], run_key_prefix: str | None
) -> list[dg.RunRequest]:
    """One run per (model, seed) partition of the sweep, tagged with its provider (the run
    queue limits runs per provider by that tag)."""
    return [
        dg.RunRequest(
            run_key=None if run_key_prefix is None else f"{run_key_prefix}:{model}|{seed}",
            partition_key=_partition(model, seed),
            tags={PROVIDER_TAG: providers.get(model, "unknown")},
        )
        for model in models
        for seed in sweep.seeds
    ]


@dg.sensor(name=MODEL_CONFIGS_SENSOR, job_name=LANES_JOB, minimum_interval_seconds=30)
def model_configs_sensor(context: dg.SensorEvaluationContext) -> dg.SensorResult | dg.SkipReason:
    """A new file in configs/models adds its model's partitions; a model the sweep names is
    also run for every seed at once. Invalid files are reported, never silently skipped."""
    scan = scan_model_configs()
    for note in scan.skipped():
        context.log.warning(note)
    known = set(context.instance.get_dynamic_partitions(MODELS_PARTITIONS))
    new = sorted(set(scan.configs) - known)
    if not new:
        return dg.SkipReason("no new model config")
    sweep = load_sweep_config()
    providers = {name: config.provider for name, config in scan.configs.items()}
    to_run = [model for model in new if model in sweep.models]
    return dg.SensorResult(
        dynamic_partitions_requests=[model_partitions.build_add_request(new)],
        run_requests=sweep_run_requests(sweep, to_run, providers, run_key_prefix="new-model"),
    )


def nightly_schedule_for(sweep: SweepConfig) -> dg.ScheduleDefinition:
    @dg.schedule(
        name=NIGHTLY_SCHEDULE,
        cron_schedule=sweep.cron,
        execution_timezone=sweep.timezone,
        job_name=LANES_JOB,
    )
    def nightly(context: dg.ScheduleEvaluationContext) -> list[dg.RunRequest] | dg.SkipReason:
        """Every (model, seed) partition of the sweep, once per scheduled night (the run key
        names the night); models whose partitions do not exist yet are left to the sensor."""
        known = set(context.instance.get_dynamic_partitions(MODELS_PARTITIONS))
        ready = [model for model in sweep.models if model in known]
        missing = sorted(set(sweep.models) - known)
        if missing:
            context.log.warning(f"not yet registered, skipped tonight: {', '.join(missing)}")
        if not ready:
            return dg.SkipReason("no model of the sweep has partitions yet")
        night = context.scheduled_execution_time.strftime("%Y-%m-%d")
        providers = {name: config.provider for name, config in scan_model_configs().configs.items()}
        return sweep_run_requests(sweep, ready, providers, run_key_prefix=f"{sweep.name}-{night}")

    return nightly


nightly_schedule = nightly_schedule_for(load_sweep_config())
