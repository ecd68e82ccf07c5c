"""`evalp sweep`: both lanes for each model × seed, then the results."""

from __future__ import annotations

import sys

import click

from eval_pipeline import paths
from eval_pipeline.cli.common import fail, parse_seeds, selection_of, subset_options
from eval_pipeline.cli.subset import run_subset


@click.command()
@click.option(
    "--models",
    required=True,
    help="Comma-separated model config names (configs/models), e.g. claude-sonnet-4-5,gpt-4.1.",
)
@click.option("--seeds", default="0,1,2", show_default=True, help="Comma-separated seeds.")
@click.option(
    "--dry-run", is_flag=True, help="Print the calls and their worst-case cost; call nothing."
)
@subset_options
def sweep(
    models: str,
    seeds: str,
    dry_run: bool,
    case_patterns: str,
    categories: str,
    limit: int | None,
) -> None:
    """Both lanes for each model × seed on the fixture set the main job froze, then scores,
    the gate, tracking and the report; real providers read their keys from the environment.
    The plan (calls and worst-case cost) is printed first. Exits 1 if a case got no usable
    reply (‡), printing the top causes; run it again once fixed to re-run those cases.

    With --cases, --categories or --limit: a quick run of both lanes on those cases only, in
    a folder of its own (var/subsets/), printed and never published as the suite."""
    from eval_pipeline import world_stages
    from eval_pipeline.experiments.sweep_plan import plan_sweep
    from eval_pipeline.project_configs import load_price_book, scan_model_configs
    from eval_pipeline.providers.harness import utc_today
    from eval_pipeline.scoring.judge import load_judge

    names = [name.strip() for name in models.split(",") if name.strip()]
    if not names:
        fail("--models names no model config")
    seed_list = parse_seeds(seeds)
    from eval_pipeline.lanes.sweep_config import load_sweep_config

    selection = selection_of(case_patterns, categories, limit)
    partitioned = load_sweep_config().seeds  # the lanes' seed partitions
    unknown = [seed for seed in seed_list if seed not in partitioned]
    if unknown and not selection.chosen_anything:  # a subset runs outside the partitions
        raise click.BadParameter(
            f"seed(s) {', '.join(map(str, unknown))} are not partitions of the lanes: the "
            f"sweep config {paths.sweep_config()} declares seeds "
            f"{', '.join(map(str, partitioned))}; add them there first",
            param_hint="--seeds",
        )
    judge = load_judge()
    scan = scan_model_configs()
    configs = scan.require([*names, judge.model])
    fixture_set = world_stages.current_fixture_set(paths.warehouse_path())
    chosen = selection.choose(fixture_set.cases) if selection.chosen_anything else None
    plan = plan_sweep(
        [configs[name] for name in names],
        seed_list,
        ("model", "product"),
        fixture_set,
        load_price_book(),
        utc_today(),
        judge,
        configs[judge.model],
        cases=chosen,
    )
    cases_shown = (
        f"{len(fixture_set.cases)} cases"
        if chosen is None
        else f"a SUBSET: {len(chosen)} of its {len(fixture_set.cases)} cases, "
        f"{selection.describe()}"
    )
    click.echo(
        f"Sweep plan: {', '.join(names)} × seeds {', '.join(map(str, seed_list))} on fixture "
        f"set {plan.fixture_id} ({cases_shown}), prices of {plan.day}:"
    )
    click.echo("\n".join("  " + line for line in plan.table().splitlines()))
    click.echo(
        f"Worst case: ${plan.worst_case_usd:,.2f} (every request at its bound, every attempt "
        "billed; the budget reserves each call's bound before sending it)"
    )
    for call in plan.calls:
        click.echo(f"  {call.model} as {call.role}: {call.bound}")
    for name, variable in sorted(plan.missing_keys.items()):
        click.echo(f"missing key: {name} reads {variable}, which is not set", err=True)
    if dry_run:
        click.echo("Dry run: nothing was called.")
        return
    if plan.missing_keys:
        fail(
            "not started: set "
            + ", ".join(sorted(set(plan.missing_keys.values())))
            + " in the environment"
        )
    if chosen is not None:
        run_subset(names, seed_list, selection)
        return
    from eval_pipeline.cli.outcomes import (
        echo_gate,
        echo_headline,
        echo_lanes,
        echo_results,
        echo_unhealed,
    )
    from eval_pipeline.dagster_client.display import MissionBar
    from eval_pipeline.dagster_client.launch import run_sweep

    bar = MissionBar()
    try:
        outcome = run_sweep(names, seed_list, progress=bar)
    finally:
        bar.close()
    echo_lanes(outcome.lanes)
    if outcome.results is not None:
        echo_results(outcome.results)
        echo_headline(outcome.results)
        echo_gate(outcome.results)
    unhealed = echo_unhealed(outcome.lanes)
    if not outcome.success or unhealed:
        sys.exit(1)
