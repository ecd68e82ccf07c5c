"""The model-call layer's calibration on the simulated provider, as an asset with its check."""

import asyncio
from pathlib import Path
from typing import ClassVar

import dagster as dg

from eval_pipeline import paths
from eval_pipeline.defs.code_versions import asset_code_version
from eval_pipeline.defs.figures import AssetFigures, Markdown
from eval_pipeline.defs.keys import (
    MODEL_CONFIGS_SOURCE,
    PLANTED_LABELS_RECOVERED,
    PRICE_BOOK_SOURCE,
    PROVIDER_CALIBRATION_ASSET,
    PROVIDERS_GROUP,
    WAREHOUSE_POOL,
)
from eval_pipeline.defs.model_sessions import run_slots
from eval_pipeline.defs.resources import SimulatedProvider, WarehouseResource
from eval_pipeline.project_configs import scan_model_configs
from eval_pipeline.providers.calibration import (
    CALIBRATION_PLAN,
    CALIBRATION_SIM_OPTIONS,
    PLANTED_CONFIGS,
    PlantedCalibration,
    calibrate_planted_configs,
)


class CalibrationFigures(AssetFigures):
    asset: ClassVar[str] = PROVIDER_CALIBRATION_ASSET
    calls: int
    calibration_run_id: str
    summary: Markdown
    """What the classifier recovered, per planted config (a markdown table)."""


def _calibration_table(reports: list[PlantedCalibration]) -> str:
    rows = [
        "| model (simulated provider) | wire | labels recovered | naive 200+text | yield | "
        "accuracy on yield | retries | infra errors ‡ |",
        "|---|---|---|---:|---:|---:|---:|---:|",
    ]
    for report in reports:
        rows.append(
            f"| {report.model} | {report.api} | {'all 24' if report.recovered else 'NO'} | "
            f"{report.naive_passes}/{report.total} | {report.yield_rate} | "
            f"{report.accuracy_on_yield} | {report.retries} | {report.infra_errors} |"
        )
    return "\n".join(rows)


@dg.asset(
    name=PROVIDER_CALIBRATION_ASSET,
    group_name=PROVIDERS_GROUP,
    kinds={"duckdb"},
    pool=WAREHOUSE_POOL,
    deps=[MODEL_CONFIGS_SOURCE, PRICE_BOOK_SOURCE],
    code_version=asset_code_version(f"calibration/{CALIBRATION_PLAN}", __name__),
    check_specs=[
        dg.AssetCheckSpec(
            PLANTED_LABELS_RECOVERED,
            asset=PROVIDER_CALIBRATION_ASSET,
            blocking=True,
            description="The call classifier recovers the label of every failure planted in "
            "the simulated provider, in both wire formats.",
        )
    ],
)
def provider_calibration_asset(
    context: dg.AssetExecutionContext, warehouse: WarehouseResource, sim: SimulatedProvider
) -> dg.MaterializeResult:  # type: ignore[type-arg]
    """The call classifier run on 24 failures planted in the simulated provider, through the
    real SDKs over HTTP in both wire formats; every envelope lands in runs.call_envelopes."""
    from eval_pipeline.providers.envelope import JOURNAL_NAME
    from eval_pipeline.sim.process import SIM_REQUEST_LOG
    from eval_pipeline.sim.sessions import session_for
    from eval_pipeline.warehouse.envelopes import load_journal

    run_id = f"calibration-{context.run.run_id}"
    run_dir = paths.runs_dir() / run_id
    journal = run_dir / JOURNAL_NAME
    scan = scan_model_configs()
    configs = scan.require(PLANTED_CONFIGS)
    for note in scan.skipped():
        context.log.warning(note)

    # The sim keeps its own record of every request beside the journal: what the
    # provider saw and billed, to compare with what was journaled (even after a crash).
    with (
        run_slots(context.instance) as slots,
        session_for(
            configs,
            run_id=run_id,
            journal=journal,
            start_sim=lambda: sim.running(
                profile_options=CALIBRATION_SIM_OPTIONS, request_log=run_dir / SIM_REQUEST_LOG
            ),
            sim_api_key=sim.api_key,
            slots=slots,
        ) as session,
    ):

        async def calibrate() -> list[PlantedCalibration]:
            async with session:
                return await calibrate_planted_configs(session, configs)

        reports = asyncio.run(calibrate())
    if journal.exists():
        load_journal(journal, Path(warehouse.path))
    mismatches = [f"{r.model}: {m}" for r in reports for m in r.mismatches]
    return dg.MaterializeResult(
        metadata={
            **CalibrationFigures(
                calls=sum(r.total for r in reports),
                calibration_run_id=run_id,
                summary=_calibration_table(reports),
            ).metadata(),
            "provider": "simulated provider (eval_pipeline.sim), planted profile",
            "journal": dg.MetadataValue.path(str(journal)),
            "sim_request_log": dg.MetadataValue.path(str(run_dir / SIM_REQUEST_LOG)),
            "skipped_model_configs": dg.MetadataValue.json(scan.skipped()),
        },
        check_results=[
            dg.AssetCheckResult(
                check_name=PLANTED_LABELS_RECOVERED,
                passed=not mismatches,
                severity=dg.AssetCheckSeverity.ERROR,
                metadata={"mismatches": dg.MetadataValue.json(mismatches)},
            )
        ],
    )
