"""`evalp experiment`: pre-registered experiments (list, register, run)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from eval_pipeline import paths
from eval_pipeline.cli.common import fail, selection_of, subset_options

if TYPE_CHECKING:
    from eval_pipeline.cases.frozen import FixtureSet
    from eval_pipeline.experiments.registry import Registration
    from eval_pipeline.experiments.spec import ExperimentSpec
    from eval_pipeline.experiments.subset import CaseSelection
    from eval_pipeline.providers.config import ModelConfig
    from eval_pipeline.scoring.judge import Judge


@click.group()
def experiment() -> None:
    """Pre-registered experiments: register a spec before any result, then run it."""


@experiment.command("list")
def experiment_list() -> None:
    """Every spec in configs/experiments and whether it is registered."""
    from eval_pipeline.experiments.registry import find_registration
    from eval_pipeline.experiments.spec import scan_specs
    from eval_pipeline.tracking.mlflow_store import default_store, open_client

    specs, errors = scan_specs()
    client = open_client(default_store())
    for spec in specs:
        registration = find_registration(client, spec.id)
        state = (
            "not registered"
            if registration is None
            else f"registered {registration.spec_hash[:12]}"
        )
        click.echo(f"{spec.id}: {spec.kind}, margin {spec.margin:g}; {state}")
    for error in errors:
        click.echo(f"invalid: {error}", err=True)


@experiment.command("register")
@click.argument("experiment_id")
def experiment_register(experiment_id: str) -> None:
    """Hash the spec (with the model configs and judge it names) and log it to MLflow as a
    registration run, before any result exists."""
    from eval_pipeline.dagster_client.launch import register_experiment
    from eval_pipeline.experiments.spec import load_spec
    from eval_pipeline.tracking.mlflow_store import default_store

    registration, new = register_experiment(load_spec(experiment_id))
    store = default_store()
    verb = "registered" if new else "already registered, unchanged"
    click.echo(
        f"{experiment_id}: {verb}; spec hash {registration.spec_hash}; MLflow run "
        f"{registration.run_id} in {store.uri}"
    )


@experiment.command("run")
@click.argument("experiment_id")
@subset_options
def experiment_run(
    experiment_id: str, case_patterns: str, categories: str, limit: int | None
) -> None:
    """Run both arms (one Dagster run per arm partition) and write the parity report;
    refuses an unregistered or altered spec, or another fixture set.

    With --cases, --categories or --limit: the registered arms on those cases only, in a
    folder of their own, the parity table printed as a SUBSET; no report, no MLflow result,
    no verdict of record."""
    from eval_pipeline import world_stages
    from eval_pipeline.dagster_client.launch import run_experiment
    from eval_pipeline.experiments.registry import require_registration
    from eval_pipeline.experiments.spec import load_spec, resolve
    from eval_pipeline.tracking.mlflow_store import default_store, open_client

    selection = selection_of(case_patterns, categories, limit)
    spec = load_spec(experiment_id)
    material, configs, judge = resolve(spec)
    fixture_set = world_stages.current_fixture_set(paths.warehouse_path())
    registration = require_registration(
        open_client(default_store()), spec, material, fixture_set.fixture_id
    )
    if selection.chosen_anything:  # registered first: a subset is a smoke test, not a peek
        _run_experiment_subset(spec, selection, fixture_set, configs, judge, registration)
        return
    click.echo(f"{experiment_id}: registration {registration.run_id} holds; running the arms")
    outcomes = run_experiment(experiment_id)
    for outcome in outcomes:
        for failure in outcome.failures:
            click.echo(f"  {failure.step}: {failure.message}", err=True)
    if not all(o.success for o in outcomes):
        fail(f"experiment {experiment_id} did not finish (Dagster run {outcomes[-1].run_id})", 1)
    from eval_pipeline.defs.experiment_assets import ParityFigures, parity_report_key

    key = parity_report_key(experiment_id).to_user_string()
    report = ParityFigures.read(outcomes[-1].materializations, key)
    if report is None:
        fail(
            f"experiment {experiment_id}: its last run (Dagster run {outcomes[-1].run_id}) "
            f"materialized no {key}",
            1,
        )
    click.echo(report.report)
    click.echo(f"report: {report.path}")


def _run_experiment_subset(
    spec: ExperimentSpec,
    selection: CaseSelection,
    fixture_set: FixtureSet,
    configs: dict[str, ModelConfig],
    judge: Judge,
    registration: Registration,
) -> None:
    from datetime import UTC, datetime

    from eval_pipeline.experiments.arms import run_arms_on_subset
    from eval_pipeline.experiments.parity import parity_report, report_markdown
    from eval_pipeline.experiments.subset import new_run_id, subset_banner, subset_root
    from eval_pipeline.lanes.agent_db import build_agent_world_db
    from eval_pipeline.providers.config import SIMULATED
    from eval_pipeline.scoring.gate import load_gate_config

    chosen = selection.choose(fixture_set.cases)
    run_id = new_run_id(datetime.now(UTC))
    root = subset_root(run_id) / spec.id
    scores = run_arms_on_subset(
        spec,
        cases=chosen,
        fixture_set=fixture_set,
        agent_db=build_agent_world_db(paths.warehouse_path(), paths.agent_world_dir()),
        configs=configs,
        judge=judge,
        run_id=f"subset-{run_id}",
        root=root,
    )
    providers = {name: configs[name].provider for name in spec.models()}
    report = parity_report(spec, registration.spec_hash, scores, load_gate_config(), providers)
    seeds = sorted({seed for arm in spec.arms().values() for seed in arm.seeds})
    simulated = [name for name in spec.models() if configs[name].provider == SIMULATED]
    banner = subset_banner(
        run_id,
        len(chosen),
        len(fixture_set.cases),
        fixture_set.fixture_id,
        selection,
        seeds,
        simulated,
    )
    text = f"{banner} The verdicts below are of these cases only.\n\n" + report_markdown(
        spec, report
    )
    (root / "parity_report.md").write_text(text + "\n", encoding="utf-8")
    click.echo(text)
    click.echo(f"\nsubset report: {root / 'parity_report.md'}")
