"""The sweep report as published: what it stands on, read from the warehouse at once, and
its files written where `evalp audit`, the README's update and a reader look for them.

Dagster-free, so it is tested alone: the report's asset hands in the runs it belongs to and
attaches what :func:`publish_sweep_report` returns.
"""

from __future__ import annotations

import base64
import shutil
from collections import defaultdict
from pathlib import Path

import duckdb
from pydantic import ValidationError

from eval_pipeline import paths, world_stages
from eval_pipeline.cases.frozen import load_fixtures
from eval_pipeline.errors import EvalPipelineError
from eval_pipeline.experiments.parity import ParityReport, experiment_reports_dir
from eval_pipeline.lanes.lane_tables import distinct_call_counts, read_identities
from eval_pipeline.providers.config import SIMULATED
from eval_pipeline.records import FrozenRecord
from eval_pipeline.report.refs import Provenance, RefBook, chain
from eval_pipeline.report.sweep_report import SweepReport, build_sweep_report, headline_table
from eval_pipeline.report.transcript import Transcript, read_transcripts
from eval_pipeline.scoring.aggregate import LaneSummary, summarize_scores
from eval_pipeline.scoring.compare import ModelComparison, lane_comparisons
from eval_pipeline.scoring.score import failed
from eval_pipeline.scoring.score_tables import read_scores
from eval_pipeline.tracking.provenance import CodeVersion

README_TABLE_FILE = "readme_results.md"
"""The README's results block, as `evalp demo` copies it into the README."""


class ReportError(EvalPipelineError):
    """The warehouse holds no scores the report could stand on, or scores it cannot put
    side by side."""


class SweepReportInputs(FrozenRecord):
    """What the report is made of: the current fixture set's scores, summarised, and what
    stands behind each (lane, model)."""

    fixture_id: str
    world_seed: int
    world_fingerprint: str
    scorer_version: str
    summaries: tuple[LaneSummary, ...]
    comparisons: tuple[ModelComparison, ...] = ()
    """Per lane, the models compared pairwise (who leads, by how much)."""
    failing: tuple[Transcript, ...] = ()
    """Every case run that failed (below 0.5, or never scored), with its transcript."""
    settings_hashes: dict[tuple[str, str], tuple[str, ...]]
    """The lane settings each (lane, model)'s scores were made under."""
    calls: dict[tuple[str, str], int]
    """Distinct model calls behind each (lane, model)'s case runs under those settings."""
    simulated: bool
    """Whether every lane ran on the project's simulated provider."""


class PublishedSweepReport(FrozenRecord):
    report: SweepReport
    folder: Path
    headline: tuple[str, ...]
    lineage: tuple[str, ...]
    """The chain behind every number, outermost first, a line per (lane, model)."""
    not_shown: tuple[str, ...]
    """A line per experiment report on disk this code cannot read."""


def sweep_report_dir() -> Path:
    return paths.var_dir() / "reports" / "sweep"


def read_report_inputs(
    conn: duckdb.DuckDBPyConnection, compare_against: str | None = None
) -> SweepReportInputs:
    """The scores of the fixture set the warehouse records as current, and what stands
    behind them; refuses none, or several scorer versions (then a regrade is due). Models
    are compared pairwise, or each against `compare_against`."""
    fixture_set = load_fixtures(world_stages.recorded_fixture_path(conn))
    scores = [s for s in read_scores(conn) if s.fixture_id == fixture_set.fixture_id]
    identities = read_identities(conn)
    if not scores:
        raise ReportError(f"no scores of fixture set {fixture_set.fixture_id} to report")
    scorers = sorted({s.scorer_version for s in scores})
    if len(scorers) != 1:
        raise ReportError(f"scores of several scorer versions ({scorers}): run evalp regrade")
    summaries = summarize_scores(scores)
    settings: defaultdict[tuple[str, str], set[str]] = defaultdict(set)
    for score in scores:
        settings[(score.lane, score.model)].add(score.settings_hash)
    hashes = {(s.lane, s.model): tuple(sorted(settings[(s.lane, s.model)])) for s in summaries}
    world = fixture_set.manifest.world
    return SweepReportInputs(
        fixture_id=fixture_set.fixture_id,
        world_seed=world.seed,
        world_fingerprint=world.fingerprint,
        scorer_version=scorers[0],
        summaries=tuple(summaries),
        comparisons=tuple(lane_comparisons(scores, compare_against)),
        failing=tuple(
            read_transcripts(
                conn, {c.case_id: c for c in fixture_set.cases}, [s for s in scores if failed(s)]
            )
        ),
        settings_hashes=hashes,
        calls=distinct_call_counts(conn, hashes),
        simulated=all(
            identities[h].config.get("provider") == SIMULATED
            for key in hashes.values()
            for h in key
            if h in identities
        ),
    )


def parity_reports_for(fixture_id: str) -> tuple[list[ParityReport], list[str]]:
    """The experiments' reports on this fixture set, and one line per report file that is
    not one this code can read (written by older code: re-materialize it to include it)."""
    found: list[ParityReport] = []
    unreadable: list[str] = []
    for path in sorted(experiment_reports_dir().glob("*.json")):
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


def publish_sweep_report(
    inputs: SweepReportInputs,
    *,
    asset_key: str,
    dagster_run_id: str,
    mlflow_run_id: str | None,
    code: CodeVersion,
    folder: Path | None = None,
) -> PublishedSweepReport:
    """Build the report as ``asset_key`` in the run ``dagster_run_id`` (tracked as
    ``mlflow_run_id``) and write it: markdown, one HTML page, its plots, and the README's
    results block (whose references name the latest run rather than this one, so the
    README stays true)."""
    folder = folder or sweep_report_dir()

    def provenance(run_id: str) -> Provenance:
        return Provenance(
            dagster_run_id=run_id,
            asset_key=asset_key,
            mlflow_run_id=mlflow_run_id if run_id != "latest" else "latest",
            fixture_id=inputs.fixture_id,
            world_seed=inputs.world_seed,
            world_fingerprint=inputs.world_fingerprint,
            commit=code.commit,
            dirty=code.dirty,
            scorer_version=inputs.scorer_version,
        )

    parity, unreadable = parity_reports_for(inputs.fixture_id)
    report = build_sweep_report(
        inputs.summaries,
        inputs.settings_hashes,
        provenance(dagster_run_id),
        parity,
        comparisons=inputs.comparisons,
        failing=inputs.failing,
        simulated=inputs.simulated,
        not_shown=unreadable,
    )
    (folder / "plots").mkdir(parents=True, exist_ok=True)
    (folder / "report.md").write_text(report.markdown, encoding="utf-8")
    (folder / "report.html").write_text(report.html, encoding="utf-8")
    for name, png in report.plots.items():
        (folder / "plots" / f"{name}.png").write_bytes(base64.b64decode(png))
    # A previous report's transcripts would be links to runs this report does not show.
    shutil.rmtree(folder / "transcripts", ignore_errors=True)
    for relative, page in report.pages.items():
        (folder / relative).parent.mkdir(parents=True, exist_ok=True)
        (folder / relative).write_text(page, encoding="utf-8")
    # The README's block references the numbers of its own table: one book for both.
    book = RefBook(inputs.settings_hashes)
    headline = headline_table(inputs.summaries, book)
    readme = [
        *headline,
        "",
        f"(Simulated provider; fixture set `{inputs.fixture_id}`, seeds "
        f"{', '.join(map(str, inputs.summaries[0].seeds))}; `evalp audit README.md` re-derives "
        "every number.)",
        book.references(provenance("latest")).block(),
    ]
    (folder / README_TABLE_FILE).write_text("\n".join(readme) + "\n", encoding="utf-8")
    return PublishedSweepReport(
        report=report,
        folder=folder,
        headline=tuple(headline),
        lineage=tuple(_lineage(inputs, provenance(dagster_run_id), mlflow_run_id)),
        not_shown=tuple(unreadable),
    )


def _lineage(
    inputs: SweepReportInputs, provenance: Provenance, mlflow_run_id: str | None
) -> list[str]:
    return [
        "Behind every number of this report, outermost first (`evalp audit` re-derives "
        "each number along the same chain):",
        "",
        *(
            "- "
            + chain(
                provenance,
                dagster_run=provenance.dagster_run_id,
                mlflow_run=mlflow_run_id,
                lane=s.lane,
                model=s.model,
                seeds=s.seeds,
                settings_hashes=inputs.settings_hashes[(s.lane, s.model)],
                envelopes=inputs.calls.get((s.lane, s.model), 0),
            )
            for s in inputs.summaries
        ),
    ]
