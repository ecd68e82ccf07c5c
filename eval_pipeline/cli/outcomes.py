"""What `evalp demo`, `evalp sweep` and `evalp experiment run` print once their runs ended:
each figure read from the runs' materializations as its asset's typed record
(`defs.figures.AssetFigures`), never looked up by a string spelled here."""

from __future__ import annotations

from collections.abc import Sequence

import click

from eval_pipeline.cli.common import one_line
from eval_pipeline.dagster_client.launch import ExperimentOutcome, JobOutcome
from eval_pipeline.defs.experiment_assets import ParityFigures, parity_report_key
from eval_pipeline.defs.keys import MODEL_LANE_RUNS_ASSET, PRODUCT_LANE_RUNS_ASSET
from eval_pipeline.defs.lane_assets import LaneRunFigures
from eval_pipeline.defs.report_assets import ReportFigures
from eval_pipeline.defs.score_assets import GateFigures, SummaryFigures
from eval_pipeline.defs.tracking_assets import TrackingFigures

LANE_RUNS = (MODEL_LANE_RUNS_ASSET, PRODUCT_LANE_RUNS_ASSET)
MLFLOW_UI = "http://127.0.0.1:5000"
"""Where `evalp ui` serves MLflow's UI (its default port)."""


def lane_runs(lane: JobOutcome) -> list[tuple[str, LaneRunFigures]]:
    """The lane runs a lane partition's run materialized, by asset."""
    found = [(asset, LaneRunFigures.read(lane.materializations, asset)) for asset in LANE_RUNS]
    return [(asset, figures) for asset, figures in found if figures is not None]


def echo_lanes(lanes: Sequence[JobOutcome]) -> None:
    """One line per lane partition run: what ran, how it ended, what it cost."""
    for lane in lanes:
        if not lane.success:
            for failure in lane.failures:
                click.echo(
                    f"error: lanes {lane.partition}: {failure.step}: {one_line(failure.message)}",
                    err=True,
                )
            continue
        for asset, run in lane_runs(lane):
            click.echo(
                f"  {asset:<17} {lane.partition:<32} cases {run.cases} "
                f"(ran {run.cases_run}, healed {run.cases_healed}) "
                f"‡ {run.unheard} † {run.budget_stopped} "
                f"tool calls {run.tool_calls} cost ${run.cost_usd} [{run.provider}]"
            )


def echo_unhealed(lanes: Sequence[JobOutcome]) -> bool:
    """Say which lane partitions ended with cases never heard (‡) and the top causes, the
    server's own words included; True if any did (the command then exits 1)."""
    unheard = [
        (f"{asset} {lane.partition}", run)
        for lane in lanes
        for asset, run in lane_runs(lane)
        if run.unheard
    ]
    if not unheard:
        return False
    click.echo(
        f"error: {sum(run.unheard for _, run in unheard)} case(s) in {len(unheard)} lane "
        "partition(s) ended without a usable reply (‡: infrastructure or harness errors), so "
        "these numbers are not healthy. Top causes:",
        err=True,
    )
    for where, run in unheard:
        click.echo(f"  {where}: {run.unheard} case(s)", err=True)
        for cause in run.unhealed_causes:
            click.echo(f"    {cause.line()}", err=True)
    click.echo(
        "Fix the cause (the key, the server, the path) and run the same command again: "
        "the cases not heard are re-run.",
        err=True,
    )
    return True


def echo_results(results: JobOutcome) -> None:
    """Where the full table is, the checks, the README table and the MLflow runs (the
    headline and the gate's verdict are printed last, by `echo_headline` and `echo_gate`)."""
    summary = SummaryFigures.read(results.materializations)
    if summary is not None:
        click.echo(f"  summary      {summary.path}")
    for check, passed in sorted(results.checks.items()):
        click.echo(f"  check        {check}: {'passed' if passed else 'FAILED'}")
    report = ReportFigures.read(results.materializations)
    if report is not None:
        click.echo(f"  report       {report.path}  (and {report.html})")
        if results.success:
            click.echo(
                f"  readme       table {report.readme_table}  (`evalp publish --readme` "
                "writes it into README.md; nothing in the checkout is edited until then)"
            )
    tracked = TrackingFigures.read(results.materializations)
    if tracked is not None:
        click.echo(
            f"  mlflow       {tracked.mlflow_experiment}: sweep run "
            f"{tracked.mlflow_parent_run_id} with {tracked.nested_runs} nested runs "
            f"({tracked.tracking_uri}); under `evalp ui`: {MLFLOW_UI}{tracked.mlflow_runs_page}"
        )
    for failure in results.failures:
        click.echo(f"error: results: {failure.step}: {one_line(failure.message)}", err=True)


def echo_headline(results: JobOutcome) -> None:
    summary = SummaryFigures.read(results.materializations)
    if summary is None:
        return
    click.echo(
        "\nHeadline: mean case score in points over every case (each case's mean over its "
        "seeds), 95% bootstrap interval over cases; n = case × seed pairs scored, "
        "‡ never heard, † budget-stopped"
    )
    click.echo("\n".join("  " + line for line in summary.headline.splitlines()))
    if summary.comparisons:
        click.echo(
            "\nWho leads: paired difference over shared cases (candidate − reference, "
            "points), 95% bootstrap interval, McNemar p on the majority vote, and the seed "
            "noise floor (a model against itself)"
        )
        click.echo("\n".join("  " + line for line in summary.comparisons.splitlines()))


def echo_gate(results: JobOutcome) -> None:
    gate = GateFigures.read(results.materializations)
    if gate is None:
        click.echo("\nShip gate: not evaluated (see the errors above)")
        return
    passing = sum(1 for verdict in gate.verdicts_by_model.values() if verdict == "PASSES")
    click.echo(
        f"\nShip gate: {'PASSES' if gate.passed else 'FAILS'} "
        f"({passing} of {len(gate.verdicts_by_model)} candidates pass; "
        f"{gate.candidates_from or gate.reason})"
    )
    for model, verdict in gate.verdicts_by_model.items():
        failed = gate.failed_rules_by_model.get(model, [])
        click.echo(f"  {model}: {verdict}" + (f" ({'; '.join(failed)})" if failed else ""))
    for notice in gate.notices:
        click.echo(f"  notice: {notice}")


def parity_figures(experiment: ExperimentOutcome) -> ParityFigures | None:
    """The experiment's parity report, from whichever of its runs materialized it."""
    key = parity_report_key(experiment.experiment).to_user_string()
    for run in experiment.runs:
        found = ParityFigures.read(run.materializations, key)
        if found is not None:
            return found
    return None


def echo_experiments(experiments: Sequence[ExperimentOutcome]) -> None:
    if not experiments:
        return
    click.echo("\nExperiments (pre-registered; candidate − reference, points per case):")
    for experiment in experiments:
        if experiment.refused is not None:
            click.echo(f"  {experiment.experiment}: NOT RUN: {experiment.refused}")
            continue
        registered = "registered now" if experiment.newly_registered else "registration"
        click.echo(f"  {experiment.experiment} ({registered} {experiment.registration_run_id}):")
        report = parity_figures(experiment)
        if report is None:
            failed = [r for r in experiment.runs if not r.success]
            where = (failed[0].partition or "parity report") if failed else "?"
            click.echo(f"    did not finish ({where}); see the errors above")
            continue
        for c in report.comparisons:
            delta = "–" if c.difference is None else f"{c.difference:+.1f}"
            interval = (
                "no interval"
                if c.low is None or c.high is None
                else f"[{c.low:+.1f}, {c.high:+.1f}]"
            )
            margin = f"{c.kind.replace('_', '-')} margin {c.margin}"
            click.echo(
                f"    {c.candidate} vs {c.reference}: Δ {delta} {interval} ({margin}): "
                f"{c.verdict.upper()}" + (f": {c.meaning}" if c.meaning else "")
            )
        click.echo(f"    {report.path}")


def echo_where_to_look(results: JobOutcome) -> None:
    click.echo("\nWhere to look:")
    report = ReportFigures.read(results.materializations)
    if report is not None:
        click.echo(f"  report   {report.html}  (markdown: {report.path})")
        click.echo(f"  audit    evalp audit {report.path}")
    tracked = TrackingFigures.read(results.materializations)
    if tracked is not None:
        click.echo(
            f"  MLflow   experiment {tracked.mlflow_experiment}, sweep run "
            f"{tracked.mlflow_parent_run_id}: the score columns at "
            f"{MLFLOW_UI}{tracked.mlflow_runs_page}"
        )
    click.echo("  UIs      ./dev ui  (or: evalp ui): Dagster on :3000, MLflow on :5000")
