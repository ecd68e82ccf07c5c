"""Jobs: the main job (everything unpartitioned) and the lanes job (one model × seed)."""

from __future__ import annotations

import dagster as dg

from eval_pipeline.defs.keys import LANES_GROUP, LANES_JOB, MAIN_JOB

LANE_ASSETS = dg.AssetSelection.groups(LANES_GROUP) - dg.AssetSelection.assets("agent_world")

main_job = dg.define_asset_job(
    MAIN_JOB,
    selection=dg.AssetSelection.all() - LANE_ASSETS,
    description=(
        "Everything before the lanes: world, answer key, fixtures, the world-only agent "
        "database, and the call classifier's calibration on the simulated provider."
    ),
    executor_def=dg.in_process_executor,
)

lanes_job = dg.define_asset_job(
    LANES_JOB,
    selection=LANE_ASSETS,
    description="Both lanes for one model × seed partition, and their warehouse records.",
    executor_def=dg.in_process_executor,
)
