"""The sweep report: markdown, one self-contained HTML page and the README's results
table, every number linked to its provenance; attached to the asset and to the sweep's
MLflow run."""

import json
from pathlib import Path
from typing import TYPE_CHECKING

import dagster as dg

from eval_pipeline import paths
from eval_pipeline.defs.experiment_assets import parity_report_key
from eval_pipeline.defs.keys import (
    RESULTS_GROUP,
    SWEEP_REPORT_ASSET,
    SWEEP_SUMMARY_ASSET,
    SWEEP_TRACKING_ASSET,
    WAREHOUSE_POOL,
)
from eval_pipeline.defs.resources import WarehouseResource
from eval_pipeline.defs.tracking_assets import MlflowTracking
from eval_pipeline.experiments.spec import scan_specs

if TYPE_CHECKING:
    import duckdb

    from eval_pipeline.experiments.parity import ParityReport
    from eval_pipeline.report.refs import Provenance
from eval_pipeline.tracking.provenance import code_version


def report_dir() -> Path:
    return paths.var_dir() / "reports" / "sweep"


def parity_reports_for(fixture_id: str) -> "tuple[list[ParityReport], list[str]]":
    """The experiments' reports on this fixture set, and one line per report file that is
    not one this code can read (written by older code: re-materialize it to include it)."""
    from pydantic import ValidationError

    from eval_pipeline.experiments.parity import ParityReport

    folder = paths.var_dir() / "reports" / "experiments"
    found: list[ParityReport] = []
    unreadable: list[str] = []
    for path in sorted(folder.glob("*.json")):
        try:
            report = ParityReport.model_validate_json(path.read_text(encoding="utf-8"))
        except ValidationError as error:
            unreadable.append(
                f"{path} is not a parity report of this version ({error.errors()[0]['loc']}: "
                f"{error.errors()[0]['msg']}): re-materialize experiments/{path.stem}/parity_report"
            )
            continue
        if report.fixture_id == fixture_id:
            found.append(report)
    return found, unreadable


def envelope_counts(
    conn: "duckdb.DuckDBPyConnection", hashes: dict[tuple[str, str], tuple[str, ...]]
) -> dict[tuple[str, str], int]:
    """Distinct calls behind each (lane, model)'s case runs under the report's settings."""
    counts: dict[tuple[str, str], int] = {}
    for (lane, model), settings in hashes.items():
        row = conn.execute(
            "SELECT count(DISTINCT call_id) FROM (SELECT unnest(from_json(call_ids, "
            "'[\"VARCHAR\"]')) AS call_id FROM runs.case_outcomes WHERE lane = ? AND model = ? "
            "AND list_contains(?, settings_hash))",
            [lane, model, list(settings)],
        ).fetchone()
        counts[(lane, model)] = int(row[0]) if row else 0
    return counts


@dg.asset(
    name=SWEEP_REPORT_ASSET,
    group_name=RESULTS_GROUP,
    deps=[
        SWEEP_SUMMARY_ASSET,
        SWEEP_TRACKING_ASSET,
        *(parity_report_key(spec.id) for spec in scan_specs()[0]),
    ],
    pool=WAREHOUSE_POOL,
    code_version="report-1",
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
    from eval_pipeline import world_stages
    from eval_pipeline.fixtures.frozen import load_fixtures
    from eval_pipeline.lanes.store import read_identities
    from eval_pipeline.report.refs import Provenance, RefBook, chain

    # matplotlib comes with it: imported here, not when the definitions load.
    from eval_pipeline.report.sweep import build_sweep_report, headline_table
    from eval_pipeline.scoring.aggregate import summarize_scores
    from eval_pipeline.scoring.store import read_scores
    from eval_pipeline.tracking.runs import log_texts

    with warehouse.connection() as conn:
        fixture_set = load_fixtures(world_stages.recorded_fixture_path(conn))
        scores = [s for s in read_scores(conn) if s.fixture_id == fixture_set.fixture_id]
        identities = read_identities(conn)
    if not scores:
        raise dg.Failure(f"no scores of fixture set {fixture_set.fixture_id} to report")
    scorers = sorted({s.scorer_version for s in scores})
    if len(scorers) != 1:
        raise dg.Failure(f"scores of several scorer versions ({scorers}): run evalp regrade")
    summaries = summarize_scores(scores)
    hashes = {
        (s.lane, s.model): tuple(
            sorted({x.settings_hash for x in scores if (x.lane, x.model) == (s.lane, s.model)})
        )
        for s in summaries
    }
    tracked = context.instance.get_latest_materialization_event(dg.AssetKey(SWEEP_TRACKING_ASSET))
    mlflow_run = None
    if tracked is not None and tracked.asset_materialization is not None:
        value = tracked.asset_materialization.metadata.get("mlflow_parent_run_id")
        mlflow_run = None if value is None else str(value.value)
    code = code_version()
    world = fixture_set.manifest.world

    def provenance(run_id: str) -> "Provenance":
        return Provenance(
            dagster_run_id=run_id,
            asset_key=SWEEP_REPORT_ASSET,
            mlflow_run_id=mlflow_run if run_id != "latest" else "latest",
            fixture_id=fixture_set.fixture_id,
            world_seed=world.seed,
            world_fingerprint=world.fingerprint,
            commit=code.commit,
            dirty=code.dirty,
            scorer_version=scorers[0],
        )

    simulated = all(
        identities[h].config.get("provider") == "simulated"
        for key in hashes.values()
        for h in key
        if h in identities
    )
    with warehouse.connection() as conn:
        envelopes = envelope_counts(conn, hashes)
    lineage = [
        "Behind every number of this report, outermost first (`evalp audit` re-derives "
        "each number along the same chain):",
        "",
        *(
            "- "
            + chain(
                provenance(context.run.run_id),
                dagster_run=context.run.run_id,
                mlflow_run=mlflow_run,
                lane=s.lane,
                model=s.model,
                seeds=s.seeds,
                settings_hashes=hashes[(s.lane, s.model)],
                envelopes=envelopes.get((s.lane, s.model), 0),
            )
            for s in summaries
        ),
    ]
    parity, unreadable = parity_reports_for(fixture_set.fixture_id)
    for line in unreadable:
        context.log.warning(line)
    report = build_sweep_report(
        summaries,
        hashes,
        provenance(context.run.run_id),
        parity,
        simulated=simulated,
        not_shown=unreadable,
    )
    folder = report_dir()
    (folder / "plots").mkdir(parents=True, exist_ok=True)
    (folder / "report.md").write_text(report.markdown, encoding="utf-8")
    (folder / "report.html").write_text(report.html, encoding="utf-8")
    import base64

    for name, png in report.plots.items():
        (folder / "plots" / f"{name}.png").write_bytes(base64.b64decode(png))
    book = RefBook(hashes)
    readme = "\n".join(
        [
            *headline_table(summaries, book),
            "",
            f"(Simulated provider; fixture set `{fixture_set.fixture_id}`, seeds "
            f"{', '.join(map(str, summaries[0].seeds))}; `evalp audit README.md` re-derives "
            "every number.)",
            book.references(provenance("latest")).block(),
        ]
    )
    (folder / "readme_results.md").write_text(readme + "\n", encoding="utf-8")
    if mlflow_run is not None:
        log_texts(
            tracking.client(),
            mlflow_run,
            {"report/report.md": report.markdown, "report/report.html": report.html},
        )
    return dg.MaterializeResult(
        metadata={
            "path": dg.MetadataValue.path(str(folder / "report.md")),
            "html": dg.MetadataValue.path(str(folder / "report.html")),
            "readme_table": dg.MetadataValue.path(str(folder / "readme_results.md")),
            "mlflow_run_id": mlflow_run or "",
            "referenced_numbers": len(report.references.numbers),
            "experiment_reports_not_shown": dg.MetadataValue.json(unreadable),
            "plots": dg.MetadataValue.json(sorted(report.plots)),
            "headline": dg.MetadataValue.md("\n".join(headline_table(summaries, RefBook(hashes)))),
            "lineage": dg.MetadataValue.md("\n".join(lineage)),
            "provenance": dg.MetadataValue.json(
                json.loads(report.references.provenance.model_dump_json())
            ),
        }
    )
