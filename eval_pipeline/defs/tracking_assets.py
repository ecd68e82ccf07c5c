"""The sweep's MLflow tracking asset: a parent run per sweep, nested runs per lane × model
× seed (the resource around the client is `resources.MlflowTracking`)."""

from typing import ClassVar

import dagster as dg

from eval_pipeline.defs.automation import AFTER_THE_LANES
from eval_pipeline.defs.code_versions import asset_code_version
from eval_pipeline.defs.figures import AssetFigures
from eval_pipeline.defs.keys import (
    RESULTS_GROUP,
    SWEEP_SUMMARY_ASSET,
    SWEEP_TRACKING_ASSET,
    WAREHOUSE_POOL,
)
from eval_pipeline.defs.resources import MlflowTracking, WarehouseResource


class TrackingFigures(AssetFigures):
    asset: ClassVar[str] = SWEEP_TRACKING_ASSET
    tracking_uri: str
    mlflow_experiment: str
    mlflow_parent_run_id: str
    mlflow_runs_page: str
    """The sweep's runs in MLflow's UI, as a path under its address."""
    nested_runs: int


@dg.asset(
    name=SWEEP_TRACKING_ASSET,
    group_name=RESULTS_GROUP,
    deps=[SWEEP_SUMMARY_ASSET],
    pool=WAREHOUSE_POOL,
    automation_condition=AFTER_THE_LANES,
    code_version=asset_code_version("tracking", __name__),
)
def sweep_tracking_asset(
    context: dg.AssetExecutionContext, warehouse: WarehouseResource, tracking: MlflowTracking
) -> dg.MaterializeResult:  # type: ignore[type-arg]
    """The stored scores of the current fixture set, logged to MLflow as one sweep."""
    from eval_pipeline import paths, world_stages
    from eval_pipeline.cases.frozen import load_fixtures
    from eval_pipeline.lanes.lane_tables import read_identities
    from eval_pipeline.lanes.sweep_config import load_sweep_config
    from eval_pipeline.scoring.score_tables import read_scores
    from eval_pipeline.tracking.provenance import code_version
    from eval_pipeline.tracking.sweep_runs import log_sweep

    store = tracking.store()
    client = tracking.client()
    with warehouse.connection() as conn:
        fixture_set = load_fixtures(world_stages.recorded_fixture_path(conn))
        scores = [s for s in read_scores(conn) if s.fixture_id == fixture_set.fixture_id]
        identities = read_identities(conn)
    if not scores:
        raise dg.Failure(
            f"no scores of fixture set {fixture_set.fixture_id} in the warehouse: "
            "materialize the lanes' score partitions"
        )
    summary_file = paths.var_dir() / "reports" / "sweep_summary.md"
    logged = log_sweep(
        client,
        store,
        scores,
        identities,
        world=fixture_set.manifest.world,
        code=code_version(),
        name=f"sweep {context.run.run_id[:8]}",
        compare_against=load_sweep_config().compare_against,
        tags={
            "dagster.run_id": context.run.run_id,
            "dagster.asset_key": context.asset_key.to_user_string(),
        },
        artifacts={"fixture_manifest.json": fixture_set.manifest.model_dump_json(indent=1)}
        | (
            {"sweep_summary_asset.md": summary_file.read_text(encoding="utf-8")}
            if summary_file.exists()
            else {}
        ),
    )
    return dg.MaterializeResult(
        metadata={
            **TrackingFigures(
                tracking_uri=store.uri,
                mlflow_experiment=logged.experiment_name,
                mlflow_parent_run_id=logged.parent_run_id,
                mlflow_runs_page=logged.runs_page,
                nested_runs=len(logged.nested),
            ).metadata(),
            "mlflow_experiment_id": logged.experiment_id,
            "metrics_logged": logged.metrics,
            "fixture_id": fixture_set.fixture_id,
        }
    )
