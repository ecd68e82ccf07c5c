"""Composes the Dagster definitions; nothing else lives here (but the one call that makes
every process loading them, run workers and code servers, exit quickly: see
`eval_pipeline.shutdown`)."""

from __future__ import annotations

import dagster as dg

from eval_pipeline.defs.automation import evaluation_chain_sensor
from eval_pipeline.defs.config_sources import config_sources, observe_configs_job
from eval_pipeline.defs.experiment_assets import all_experiment_assets
from eval_pipeline.defs.jobs import lanes_job, main_job, regrade_job, results_job
from eval_pipeline.defs.lane_assets import agent_world_asset, lane_runs_asset
from eval_pipeline.defs.lane_automation import model_configs_sensor, nightly_schedule
from eval_pipeline.defs.lane_warehouse_assets import lane_warehouse_asset
from eval_pipeline.defs.provider_assets import provider_calibration_asset
from eval_pipeline.defs.report_assets import sweep_report_asset
from eval_pipeline.defs.resources import default_resources
from eval_pipeline.defs.score_assets import ship_gate_asset, sweep_summary_asset
from eval_pipeline.defs.tracking_assets import sweep_tracking_asset
from eval_pipeline.defs.world_assets import (
    answer_key_asset,
    fixtures_asset,
    fixtures_match_world,
    world_asset,
)
from eval_pipeline.shutdown import skip_shutdown_collections

skip_shutdown_collections()

defs = dg.Definitions(
    assets=[
        *config_sources,
        world_asset,
        answer_key_asset,
        fixtures_asset,
        provider_calibration_asset,
        agent_world_asset,
        lane_runs_asset,
        lane_warehouse_asset,
        sweep_summary_asset,
        ship_gate_asset,
        sweep_tracking_asset,
        sweep_report_asset,
        *all_experiment_assets(),
    ],
    asset_checks=[fixtures_match_world],
    jobs=[main_job, lanes_job, regrade_job, results_job, observe_configs_job],
    sensors=[model_configs_sensor, evaluation_chain_sensor],
    schedules=[nightly_schedule],
    resources=default_resources(),
)
