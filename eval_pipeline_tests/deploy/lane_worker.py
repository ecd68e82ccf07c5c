"""One lane partition materialized in a process of its own, on the Dagster instance that
DAGSTER_HOME names (what a run worker on another machine does). Used by
test_postgres_storage.py: several of these run at once.

    python -m eval_pipeline_tests.deploy.lane_worker HOME LANE MODEL SEED BARRIER_DIR PARTIES

It materializes LANE's runs and records for the partition MODEL|SEED. It waits until
PARTIES workers are ready (files in BARRIER_DIR) so that the runs really overlap, then
prints one JSON line: the lane, the run id and whether it succeeded.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import dagster as dg

from eval_pipeline.defs.keys import (
    MODEL_LANE_RECORDS_ASSET,
    MODEL_LANE_RUNS_ASSET,
    PRODUCT_LANE_RECORDS_ASSET,
    PRODUCT_LANE_RUNS_ASSET,
    PROVIDER_TAG,
)
from eval_pipeline.defs.lane_assets import lane_runs_asset
from eval_pipeline.defs.lane_warehouse_assets import lane_warehouse_asset
from eval_pipeline_tests.defs.conftest import lane_resources

LANE_STEPS = {
    "model": [lane_runs_asset, lane_warehouse_asset],
    "product": [lane_runs_asset, lane_warehouse_asset],
}
SELECTED = {
    "model": [MODEL_LANE_RUNS_ASSET, MODEL_LANE_RECORDS_ASSET],
    "product": [PRODUCT_LANE_RUNS_ASSET, PRODUCT_LANE_RECORDS_ASSET],
}
BARRIER_TIMEOUT_S = 90.0


def wait_for_peers(barrier: Path, name: str, parties: int) -> None:
    (barrier / f"{name}.ready").touch()
    deadline = time.monotonic() + BARRIER_TIMEOUT_S
    while len(list(barrier.glob("*.ready"))) < parties:
        if time.monotonic() > deadline:
            raise TimeoutError(f"{name}: peers not ready after {BARRIER_TIMEOUT_S} s in {barrier}")
        time.sleep(0.05)


def main(argv: list[str]) -> int:
    home, lane, model, seed, barrier, parties = argv
    key = dg.MultiPartitionKey({"model": model, "seed": seed})
    with dg.DagsterInstance.get() as instance:
        wait_for_peers(Path(barrier), f"{lane}-{model}-{seed}", int(parties))
        result = dg.materialize(
            LANE_STEPS[lane],
            selection=SELECTED[lane],
            instance=instance,
            resources=lane_resources(Path(home)),
            partition_key=key,
            tags={PROVIDER_TAG: "simulated"},
            raise_on_error=False,
        )
    print(json.dumps({"lane": lane, "run_id": result.run_id, "success": result.success}))
    return 0 if result.success else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
