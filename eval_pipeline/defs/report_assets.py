"""The sweep report: markdown, one self-contained HTML page and the README's results
table, every number linked to its provenance; attached to the asset and to the sweep's
MLflow run."""

import json
from typing import ClassVar

import dagster as dg

from eval_pipeline.defs.automation import AFTER_THE_LANES
from eval_pipeline.defs.code_versions import asset_code_version
from eval_pipeline.defs.experiment_assets import parity_report_key
from eval_pipeline.defs.figures import AssetFigures, FilePath
from eval_pipeline.defs.keys import (
    RESULTS_GROUP,
    SWEEP_REPORT_ASSET,
    SWEEP_SUMMARY_ASSET,
    SWEEP_TRACKING_ASSET,
    WAREHOUSE_POOL,
)
from eval_pipeline.defs.resources import MlflowTracking, WarehouseResource
from eval_pipeline.experiments.spec import scan_specs
from eval_pipeline.tracking.provenance import code_version


class ReportFigures(AssetFigures):
    asset: ClassVar[str] = SWEEP_REPORT_ASSET
    path: FilePath
    html: FilePath
    readme_table: FilePath
    """The README's results table (`evalp publish --readme` writes it into README.md)."""


@dg.asset(
    name=SWEEP_REPORT_ASSET,
    group_name=RESULTS_GROUP,
    deps=[
        SWEEP_SUMMARY_ASSET,
        SWEEP_TRACKING_ASSET,
        *(parity_report_key(spec.id) for spec in scan_specs()[0]),
    ],
    pool=WAREHOUSE_POOL,
    automation_condition=AFTER_THE_LANES,
    code_version=asset_code_version("report", __name__),
    description=(
        "The report a person reads and `evalp audit` checks. Its lineage is the chain behind "
        "every number: the summary over the lanes' scores, records and runs, the fixtures and "
        "world they ran on, the MLflow sweep run, and each experiment's parity report."
    ),
)
def sweep_report_asset(
    context: dg.AssetExecutionContext, warehouse: WarehouseResource, tracking: MlflowTracking
) -> dg.MaterializeResult:  # type: ignore[type-arg]
    """The report a person reads and `evalp audit` checks."""
    # matplotlib comes with it: imported here, not when the definitions load.
    from eval_pipeline.lanes.sweep_config import load_sweep_config
    from eval_pipeline.report.publish import (
        README_TABLE_FILE,
        ReportError,
        publish_sweep_report,
        read_report_inputs,
    )
    from eval_pipeline.tracking.runs import log_texts

    try:
        with warehouse.connection() as conn:
            inputs = read_report_inputs(conn, load_sweep_config().compare_against)
    except ReportError as error:
        raise dg.Failure(str(error)) from error
    mlflow_run = _sweep_mlflow_run(context)
    published = publish_sweep_report(
        inputs,
        asset_key=SWEEP_REPORT_ASSET,
        dagster_run_id=context.run.run_id,
        mlflow_run_id=mlflow_run,
        code=code_version(),
    )
    for line in published.not_shown:
        context.log.warning(line)
    report, folder = published.report, published.folder
    if mlflow_run is not None:
        log_texts(
            tracking.client(),
            mlflow_run,
            {"report/report.md": report.markdown, "report/report.html": report.html},
        )
    return dg.MaterializeResult(
        metadata={
            **ReportFigures(
                path=str(folder / "report.md"),
                html=str(folder / "report.html"),
                readme_table=str(folder / README_TABLE_FILE),
            ).metadata(),
            "mlflow_run_id": mlflow_run or "",
            "referenced_numbers": len(report.references.numbers),
            "experiment_reports_not_shown": dg.MetadataValue.json(list(published.not_shown)),
            "plots": dg.MetadataValue.json(sorted(report.plots)),
            "headline": dg.MetadataValue.md("\n".join(published.headline)),
            "lineage": dg.MetadataValue.md("\n".join(published.lineage)),
            "provenance": dg.MetadataValue.json(
                json.loads(report.references.provenance.model_dump_json())
            ),
        }
    )


def _sweep_mlflow_run(context: dg.AssetExecutionContext) -> str | None:
    """The MLflow parent run of the sweep, as its tracking asset last recorded it."""
    tracked = context.instance.get_latest_materialization_event(dg.AssetKey(SWEEP_TRACKING_ASSET))
    if tracked is None or tracked.asset_materialization is None:
        return None
    value = tracked.asset_materialization.metadata.get("mlflow_parent_run_id")
    return None if value is None else str(value.value)
