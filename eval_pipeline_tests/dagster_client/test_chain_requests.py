"""`evalp sweep` runs the results its assets' automation conditions request after the lanes,
not a job it names: what `defs.automation` declares is what runs."""

from __future__ import annotations

import dagster as dg

from eval_pipeline.dagster_client.launch import ChainRequests
from eval_pipeline.defs.keys import MODELS_PARTITIONS, PRODUCT_LANE_SCORES_ASSET, RESULTS_JOB


def test_the_results_are_requested_once_a_lane_partitions_scores_land() -> None:
    from eval_pipeline.definitions import defs

    results = defs.resolve_job_def(RESULTS_JOB)
    with dg.DagsterInstance.ephemeral() as instance:
        instance.add_dynamic_partitions(MODELS_PARTITIONS, ["sim-small"])
        chain = ChainRequests(defs, instance, results)
        assert chain.requested() == []  # nothing landed since it was made
        instance.report_runless_asset_event(
            dg.AssetMaterialization(
                dg.AssetKey(PRODUCT_LANE_SCORES_ASSET),
                partition=str(dg.MultiPartitionKey({"model": "sim-small", "seed": "0"})),
            )
        )
        requested = {key.to_user_string() for key in chain.requested()}
        assert requested == {
            key.to_user_string() for key in results.asset_layer.selected_asset_keys
        }, requested
        assert chain.requested() == []  # asked again: handled already
