"""Jobs: the main job runs the whole pipeline as far as it is built."""

from __future__ import annotations

import dagster as dg

from eval_pipeline.defs.keys import MAIN_JOB

main_job = dg.define_asset_job(
    MAIN_JOB,
    selection=dg.AssetSelection.all(),
    description=(
        "The whole pipeline as far as it is built: world, answer key, fixtures, and the "
        "call classifier's calibration on the simulated provider."
    ),
    executor_def=dg.in_process_executor,
)
