"""A lane partition's warehouse work in one step: both lanes' records, then their scores.

Four assets, one step, one claim on the `warehouse` pool. As four steps, each run of a
night claimed the pool four times, and Dagster hands a freed slot to the next waiting step
only when that step next looks (it backs off up to 15 s between looks): with eight runs
finishing their lanes together, the warehouse sat idle half the time and a night's runs
waited on it for a minute (bench/sweep_scale.py). One claim per run hands the slot over
once. The step can be subset: a re-score materializes the scores alone.
"""

from collections.abc import Iterator, Mapping

import dagster as dg

from eval_pipeline.defs.automation import PER_PARTITION
from eval_pipeline.defs.keys import (
    JUDGE_CONFIG_SOURCE,
    LANES_GROUP,
    MODEL_LANE_RECORDS_ASSET,
    MODEL_LANE_RUNS_ASSET,
    MODEL_LANE_SCORES_ASSET,
    PRODUCT_LANE_RECORDS_ASSET,
    PRODUCT_LANE_RUNS_ASSET,
    PRODUCT_LANE_SCORES_ASSET,
    WAREHOUSE_POOL,
)
from eval_pipeline.defs.lane_assets import LANE_CODE_VERSION, lane_partitions, lane_records
from eval_pipeline.defs.resources import (
    ModelCallSettings,
    ProjectSettings,
    SimulatedProvider,
    WarehouseResource,
)
from eval_pipeline.defs.score_assets import SCORES_CODE_VERSION, SCORES_LANE, lane_scores
from eval_pipeline.lane_records import Lane

RECORDS_LANE: Mapping[str, Lane] = {
    MODEL_LANE_RECORDS_ASSET: "model",
    PRODUCT_LANE_RECORDS_ASSET: "product",
}
LANE_WAREHOUSE_STEP = "lane_records_and_scores"


def _spec(key: str, deps: list[str], code_version: str, description: str) -> dg.AssetSpec:
    return dg.AssetSpec(
        key,
        group_name=LANES_GROUP,
        deps=deps,
        automation_condition=PER_PARTITION,
        kinds={"duckdb"},
        code_version=code_version,
        partitions_def=lane_partitions,
        description=description,
    )


RECORDS = "The partition's case runs, trace events and call envelopes, in the warehouse."


@dg.multi_asset(
    name=LANE_WAREHOUSE_STEP,
    specs=[
        _spec(MODEL_LANE_RECORDS_ASSET, [MODEL_LANE_RUNS_ASSET], LANE_CODE_VERSION, RECORDS),
        _spec(PRODUCT_LANE_RECORDS_ASSET, [PRODUCT_LANE_RUNS_ASSET], LANE_CODE_VERSION, RECORDS),
        _spec(
            MODEL_LANE_SCORES_ASSET,
            [MODEL_LANE_RECORDS_ASSET, JUDGE_CONFIG_SOURCE],
            SCORES_CODE_VERSION,
            "The partition's model-lane cases scored (first action, or the direct answer).",
        ),
        _spec(
            PRODUCT_LANE_SCORES_ASSET,
            [PRODUCT_LANE_RECORDS_ASSET, JUDGE_CONFIG_SOURCE],
            SCORES_CODE_VERSION,
            "The partition's product-lane cases scored: exact, trace checks, judged prose.",
        ),
    ],
    partitions_def=lane_partitions,
    can_subset=True,
    pool=WAREHOUSE_POOL,
)
def lane_warehouse_asset(
    context: dg.AssetExecutionContext,
    warehouse: WarehouseResource,
    settings: ProjectSettings,
    sim: SimulatedProvider,
    calls: ModelCallSettings,
) -> Iterator[dg.MaterializeResult]:  # type: ignore[type-arg]
    """Records before scores (a score reads its partition's records), each lane's only if
    selected, over one connection (each close checkpoints: four cost ~0.4 s of the pool's
    time here)."""
    selected = {key.to_user_string() for key in context.selected_asset_keys}
    with warehouse.connection() as conn:
        for key, lane in RECORDS_LANE.items():
            if key in selected:
                yield dg.MaterializeResult(
                    asset_key=key, metadata=lane_records(context, lane, conn)
                )
        for key, lane in SCORES_LANE.items():
            if key in selected:
                scored = lane_scores(context, lane, conn, settings, sim, calls)
                yield dg.MaterializeResult(
                    asset_key=key,
                    metadata=scored,
                    data_version=dg.DataVersion(str(scored["scores_digest"])),
                )
