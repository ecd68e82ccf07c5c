"""Jobs: the main job (everything before the lanes), the lanes job (one model × seed), the
regrade job (one partition's scores alone), and the results job (summary and gate over
every partition)."""

from __future__ import annotations

import dagster as dg

from eval_pipeline.defs.keys import (
    AGENT_WORLD_ASSET,
    EXPERIMENTS_GROUP,
    LANES_GROUP,
    LANES_JOB,
    MAIN_JOB,
    MODEL_LANE_SCORES_ASSET,
    PRODUCT_LANE_SCORES_ASSET,
    REGRADE_JOB,
    RESULTS_GROUP,
    RESULTS_JOB,
)
from eval_pipeline.defs.pool_wait import fix_pool_wait

fix_pool_wait()  # a run waiting for the warehouse pool sleeps, instead of spinning a core

LANE_ASSETS = dg.AssetSelection.groups(LANES_GROUP) - dg.AssetSelection.assets(AGENT_WORLD_ASSET)
RESULT_ASSETS = dg.AssetSelection.groups(RESULTS_GROUP)
EXPERIMENT_ASSETS = dg.AssetSelection.groups(EXPERIMENTS_GROUP)

main_job = dg.define_asset_job(
    MAIN_JOB,
    selection=dg.AssetSelection.all() - LANE_ASSETS - RESULT_ASSETS - EXPERIMENT_ASSETS,
    description=(
        "Everything before the lanes: world, answer key, fixtures, the world-only agent "
        "database, and the call classifier's calibration on the simulated provider."
    ),
    executor_def=dg.in_process_executor,
)

lanes_job = dg.define_asset_job(
    LANES_JOB,
    selection=LANE_ASSETS,
    description="Both lanes for one model × seed partition: runs, warehouse records, scores.",
    executor_def=dg.in_process_executor,
)

regrade_job = dg.define_asset_job(
    REGRADE_JOB,
    selection=dg.AssetSelection.assets(MODEL_LANE_SCORES_ASSET, PRODUCT_LANE_SCORES_ASSET),
    description=(
        "One partition's stored lane records scored again with the current scorers and judge "
        "(`evalp regrade`): new materializations of the scores, which make what reads them "
        "stale, without calling a lane's model."
    ),
    executor_def=dg.in_process_executor,
)

results_job = dg.define_asset_job(
    RESULTS_JOB,
    selection=RESULT_ASSETS,
    description="The sweep summary over every scored partition, and the ship gate.",
    executor_def=dg.in_process_executor,
)
