"""`evalp demo`: the whole mission on a local Dagster instance, and where it landed."""

from __future__ import annotations

import sys
from collections.abc import Mapping
from pathlib import Path

import click

from eval_pipeline import paths
from eval_pipeline.cli.common import one_line, selection_of, subset_options, world_option
from eval_pipeline.cli.subset import run_subset


@click.command()
@subset_options
@world_option
def demo(case_patterns: str, categories: str, limit: int | None, world_config: Path | None) -> None:
    """The whole mission on a local Dagster instance: world, answer key, fixtures,
    calibration, both lanes for every model and seed of the sweep, its registered
    experiments, scores, the gate, MLflow tracking and the report (after cleaning up what a
    killed earlier demo left behind). Exits 1 if a step failed or a case got no usable
    reply (‡: the top causes are printed; the next demo re-runs those cases).

    With --cases, --categories or --limit: the main job, then a quick run of the sweep's
    models and seeds on those cases only, printed and never published."""
    from eval_pipeline.cli.outcomes import (
        echo_experiments,
        echo_gate,
        echo_headline,
        echo_lanes,
        echo_results,
        echo_unhealed,
        echo_where_to_look,
    )
    from eval_pipeline.dagster_client.display import MissionBar
    from eval_pipeline.dagster_client.launch import run_main_job

    if world_config is not None:
        from eval_pipeline.paths import use_world

        use_world(world_config)
    selection = selection_of(case_patterns, categories, limit)
    bar = MissionBar()
    try:
        outcome = run_main_job(progress=bar, world_only=selection.chosen_anything)
    finally:
        bar.close()
    if selection.chosen_anything and outcome.success:
        from eval_pipeline.lanes.sweep_config import load_sweep_config

        sweep_config = load_sweep_config()
        click.echo(f"Dagster run {outcome.run_id} (main job): succeeded")
        run_subset(sweep_config.models, sweep_config.seeds, selection)
        return
    for warning in outcome.warnings:
        click.echo(f"warning: {warning}", err=True)
    recovery = outcome.recovery
    if recovery.failed_runs or recovery.loaded_journals:
        click.echo(
            f"recovered from an interrupted demo: {len(recovery.failed_runs)} run(s) left "
            f"in progress marked failed, {len(recovery.loaded_journals)} call journal(s) "
            f"loaded ({recovery.loaded_envelopes} envelopes)"
        )
    if outcome.failures:
        for failure in outcome.failures:
            click.echo(f"error: {failure.step}: {one_line(failure.message)}", err=True)
        click.echo(
            f"Dagster run {outcome.run_id} FAILED; its full log is in the Dagster UI (./dev ui)",
            err=True,
        )
        sys.exit(2 if all(failure.ours for failure in outcome.failures) else 1)
    if outcome.skipped:
        click.echo(
            f"up to date, not run again ({len(outcome.skipped)}): {', '.join(outcome.skipped)}; "
            "their latest results are shown (a changed config, code version or input re-runs "
            "what it affects)"
        )
    click.echo(f"Dagster run {outcome.run_id}: {'succeeded' if outcome.success else 'FAILED'}")
    echo_world(outcome.materializations)
    for check, passed in sorted(outcome.checks.items()):
        click.echo(f"  check        {check}: {'passed' if passed else 'FAILED'}")
    echo_lanes(outcome.lanes)
    if outcome.results is not None:
        echo_results(outcome.results)
    click.echo(f"  warehouse    {paths.warehouse_path()}  (schemas world, truth, meta, runs)")
    click.echo(f"  dagster home {outcome.dagster_home}")
    if outcome.results is not None:
        echo_headline(outcome.results)
        echo_gate(outcome.results)
        echo_experiments(outcome.experiments)
        echo_where_to_look(outcome.results)
    else:
        click.echo("Open the Dagster and MLflow UIs: ./dev ui   (or: evalp ui)")
    refused = [e.refused for e in outcome.experiments if e.refused is not None]
    for refusal in refused:
        click.echo(f"error: {one_line(refusal)}", err=True)
    unhealed = echo_unhealed(outcome.lanes)
    if unhealed:
        sys.exit(1)
    if not outcome.success:
        # Only refusals (something to fix before running again): 2; a failed run: 1.
        ran = outcome.results is not None and outcome.results.success
        sys.exit(
            2 if refused and ran and all(e.success or e.refused for e in outcome.experiments) else 1
        )


def echo_world(materializations: Mapping[str, Mapping[str, object]]) -> None:
    """The world, its answer key, the fixture set and the calibration, as the main job's
    run materialized them (or as they stand, when they were up to date)."""
    from eval_pipeline.defs.provider_assets import CalibrationFigures
    from eval_pipeline.defs.world_assets import AnswerKeyFigures, FixturesFigures, WorldFigures

    world = WorldFigures.read(materializations)
    if world is not None:
        click.echo(f"  world        seed={world.seed} fingerprint={world.world_fingerprint}")
        click.echo(
            "               "
            + ", ".join(f"{name} {count:,}" for name, count in sorted(world.row_counts.items()))
        )
    answer_key = AnswerKeyFigures.read(materializations)
    if answer_key is not None:
        click.echo(f"  answer key   fingerprint={answer_key.answer_key_fingerprint}")
    fixtures = FixturesFigures.read(materializations)
    if fixtures is not None:
        click.echo(
            f"  fixtures     id={fixtures.fixture_id} cases={fixtures.case_count}"
            f" core={fixtures.core_cases}"
        )
        click.echo(f"               {fixtures.path}")
    calibration = CalibrationFigures.read(materializations)
    if calibration is not None:
        click.echo(
            f"  calibration  {calibration.calls} calls to the simulated provider "
            f"(planted profile), run {calibration.calibration_run_id}"
        )
        click.echo("\n".join("               " + line for line in calibration.summary.splitlines()))
