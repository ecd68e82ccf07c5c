"""The `evalp` command: run the pipeline, build worlds, freeze and verify fixtures."""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import ParamSpec, TypeVar

import click

from eval_pipeline import paths
from eval_pipeline.errors import EvalPipelineError

P = ParamSpec("P")
R = TypeVar("R")


def _reports_errors(command: Callable[P, R]) -> Callable[P, R]:
    """Our own errors become one clear message and exit code 2, not a traceback."""

    @functools.wraps(command)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return command(*args, **kwargs)
        except EvalPipelineError as error:
            click.echo(f"error: {error}", err=True)
            sys.exit(2)

    return wrapper


def _world_options(command: Callable[P, R]) -> Callable[P, R]:
    """--config and --seed, shared by every command that builds a world."""
    command = click.option(
        "--seed", type=int, default=None, help="Override the config's world seed."
    )(command)
    return click.option(
        "--config",
        "config_path",
        type=click.Path(path_type=Path),
        default=None,
        help="World config YAML (default: configs/worlds/label.yaml).",
    )(command)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
def main() -> None:
    """eval_pipeline: reproducible evaluation experiments on LLM agents.

    Start with `evalp demo`, which builds the whole pipeline on embedded defaults
    (DuckDB warehouse, local Dagster instance, simulated provider) and says where
    everything landed.
    """


@main.command()
@_reports_errors
def demo() -> None:
    """Run the main job (world -> answer key -> fixtures) on a local Dagster instance."""
    from eval_pipeline.defs.runner import run_main_job

    outcome = run_main_job()
    world = outcome.materializations.get("world", {})
    fixtures = outcome.materializations.get("fixtures", {})
    answer_key = outcome.materializations.get("answer_key", {})
    click.echo(f"Dagster run {outcome.run_id}: {'succeeded' if outcome.success else 'FAILED'}")
    click.echo(
        f"  world        seed={world.get('seed')} fingerprint={world.get('world_fingerprint')}"
    )
    row_counts = world.get("row_counts", {})
    if isinstance(row_counts, dict):
        click.echo(
            "               "
            + ", ".join(f"{name} {count:,}" for name, count in sorted(row_counts.items()))
        )
    click.echo(f"  answer key   fingerprint={answer_key.get('answer_key_fingerprint')}")
    click.echo(
        f"  fixtures     id={fixtures.get('fixture_id')} cases={fixtures.get('dagster/row_count')}"
        f" core={fixtures.get('core_cases')}"
    )
    click.echo(f"               {fixtures.get('path')}")
    calibration = outcome.materializations.get("provider_calibration", {})
    click.echo(
        f"  calibration  {calibration.get('calls')} calls to the simulated provider "
        f"(planted profile), run {calibration.get('calibration_run_id')}"
    )
    summary = calibration.get("summary")
    if isinstance(summary, str):
        click.echo("\n".join("               " + line for line in summary.splitlines()))
    for check, passed in sorted(outcome.checks.items()):
        click.echo(f"  check        {check}: {'passed' if passed else 'FAILED'}")
    click.echo(f"  warehouse    {paths.warehouse_path()}  (schemas world, truth, meta, runs)")
    click.echo(f"  dagster home {outcome.dagster_home}")
    click.echo("Open the Dagster UI: ./dev ui   (or: evalp ui)")
    if not outcome.success:
        sys.exit(1)


@main.command()
@click.option("--port", type=int, default=3000, show_default=True)
def ui(port: int) -> None:
    """Open the Dagster UI on this project's local instance (dagster dev)."""
    home = paths.prepared_dagster_home()
    os.environ["DAGSTER_HOME"] = str(home)
    dagster = Path(sys.executable).with_name("dagster")
    workspace = paths.PROJECT_ROOT / "workspace.yaml"
    click.echo(f"DAGSTER_HOME={home}; serving http://127.0.0.1:{port}")
    os.execv(
        dagster, [str(dagster), "dev", "-w", str(workspace), "-h", "127.0.0.1", "-p", str(port)]
    )


@main.command()
@_world_options
@click.option(
    "--scale",
    type=float,
    default=None,
    help="Override the config's scale (multiplies statement volume).",
)
@click.option(
    "--load/--no-load", default=False, help="Also load the tables into the DuckDB warehouse."
)
@_reports_errors
def world(config_path: Path | None, seed: int | None, scale: float | None, load: bool) -> None:
    """Generate a world and print its row counts and fingerprint."""
    from eval_pipeline import stages
    from eval_pipeline.warehouse import connect
    from eval_pipeline.world import build_world, load_world_config

    config = load_world_config(config_path or paths.default_world_config(), seed=seed, scale=scale)
    generated = build_world(config)
    click.echo(
        f"world {generated.plugin} (generator {generated.generator_version}) "
        f"seed={generated.seed} scale={generated.scale}"
    )
    for name, frame in sorted(generated.tables.items()):
        click.echo(f"  {name:<22} {frame.height:>10,} rows")
    if load:
        conn = connect(paths.warehouse_path())
        try:
            stages.store_world(conn, generated)
        finally:
            conn.close()
        click.echo(f"loaded into {paths.warehouse_path()} (schema world)")
    click.echo(f"fingerprint {generated.fingerprint}")


@main.group()
def fixtures() -> None:
    """Freeze and verify content-addressed fixture sets."""


@fixtures.command("freeze")
@_world_options
@click.option(
    "--out",
    "out_root",
    type=click.Path(path_type=Path),
    default=None,
    help="Folder that receives <fixture_id>/ (default: data/fixtures).",
)
@_reports_errors
def fixtures_freeze(config_path: Path | None, seed: int | None, out_root: Path | None) -> None:
    """Generate the world and its answer key, build the suite and freeze it."""
    from eval_pipeline import stages
    from eval_pipeline.world import build_world, get_world_plugin, load_world_config

    config = load_world_config(config_path or paths.default_world_config(), seed=seed)
    generated = build_world(config)
    answer_key = get_world_plugin(generated.plugin).answer_key(generated)
    fixture_set = stages.freeze_suite(generated, answer_key, out_root or paths.fixtures_root())
    manifest = fixture_set.manifest
    click.echo(
        f"froze {manifest.case_count} cases ({manifest.core_count} core) "
        f"from world fingerprint {manifest.world.fingerprint}"
    )
    for category, count in manifest.category_counts.items():
        click.echo(f"  {category:<18} {count:>4}")
    click.echo(f"fixture_id {manifest.fixture_id}")
    click.echo(f"path {fixture_set.path}")


@fixtures.command("verify")
@click.argument("directory", type=click.Path(path_type=Path))
@_reports_errors
def fixtures_verify(directory: Path) -> None:
    """Re-hash every file of a fixture set; exit 2 naming the file if anything changed."""
    from eval_pipeline.fixtures.frozen import load_fixtures

    fixture_set = load_fixtures(directory)
    click.echo(
        f"ok {fixture_set.fixture_id}: {fixture_set.manifest.case_count} cases, "
        f"all {len(fixture_set.manifest.files) + 1} files verified"
    )


@main.group()
def sim() -> None:
    """The simulated provider (OpenAI and Anthropic wire formats over loopback HTTP)."""


@sim.command("serve")
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option("--port", type=int, default=8765, show_default=True)
@click.option("--seed", type=int, default=0, show_default=True, help="Server seed.")
@click.option(
    "--latency-ms", type=int, default=0, show_default=True, help="Delay before every reply."
)
@click.option("--profile-options", default=None, help="JSON options per profile.")
@_reports_errors
def sim_serve(
    host: str, port: int, seed: int, latency_ms: int, profile_options: str | None
) -> None:
    """Serve the simulated provider until interrupted. Results from it are simulated."""
    from eval_pipeline.sim.server import serve

    serve(host=host, port=port, seed=seed, latency_ms=latency_ms, profile_options=profile_options)


if __name__ == "__main__":
    main()
