"""`evalp baseline`: the scores the ship gate compares a candidate with."""

from __future__ import annotations

import click

from eval_pipeline import paths


@click.group()
def baseline() -> None:
    """The accepted per-category scores the ship gate compares a candidate with."""


@baseline.command("accept")
@click.option("--model", "model_name", required=True, help="A model scored in the product lane.")
def baseline_accept(model_name: str) -> None:
    """Accept the model's current product-lane scores (every stored seed) as its baseline
    in configs/baselines/<model>.yaml."""
    from eval_pipeline.scoring.gate import accept_stored_baseline

    path, accepted = accept_stored_baseline(paths.warehouse_path(), model_name)
    click.echo(f"baseline for {model_name} written to {path}")
    for category, points in sorted(accepted.categories.items()):
        click.echo(f"  {category:<18} {points:6.1f}")
