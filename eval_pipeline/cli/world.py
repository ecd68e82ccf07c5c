"""`evalp world`: generate a world and print what it holds."""

from __future__ import annotations

from pathlib import Path

import click

from eval_pipeline import paths
from eval_pipeline.cli.common import world_options


def check_scale(config_path: Path, value: float | None) -> None:
    """--scale within (0, the world's largest]: the flag is named, not the config file it
    overrides (the limit is the world plugin's that the config names)."""
    from eval_pipeline.world import load_world_config, world_registration

    if value is None:
        return
    largest = world_registration(load_world_config(config_path).plugin).max_scale
    if not 0 < value <= largest:
        raise click.BadParameter(
            f"{value:g} is not in the range 0<x<={largest:g}", param_hint="'--scale'"
        )


@click.command()
@world_options
@click.option(
    "--scale",
    type=float,
    default=None,
    help="Override the config's scale (for the label world: multiplies statement volume).",
)
@click.option(
    "--load/--no-load", default=False, help="Also load the tables into the DuckDB warehouse."
)
def world(config_path: Path | None, seed: int | None, scale: float | None, load: bool) -> None:
    """Generate a world and print its row counts and fingerprint."""
    from eval_pipeline import world_stages
    from eval_pipeline.warehouse import connect
    from eval_pipeline.world import build_world, load_world_config

    config_path = config_path or paths.default_world_config()
    check_scale(config_path, scale)
    config = load_world_config(config_path, seed=seed, scale=scale)
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
            world_stages.store_world(conn, generated)
        finally:
            conn.close()
        click.echo(f"loaded into {paths.warehouse_path()} (schema world)")
    click.echo(f"fingerprint {generated.fingerprint}")
