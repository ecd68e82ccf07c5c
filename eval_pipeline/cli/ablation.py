"""`evalp ablation`: the product lane with each guard off in turn."""

from __future__ import annotations

import click

from eval_pipeline.cli.common import parse_seeds


@click.command()
@click.option("--model", "model_name", required=True, help="A model config name (configs/models).")
@click.option("--seeds", default="0", show_default=True, help="Comma-separated replicate seeds.")
def ablation(model_name: str, seeds: str) -> None:
    """The product lane with each guard off in turn, beside the model lane, per category,
    over the world and fixture set the main job built (run `evalp demo` first)."""
    from eval_pipeline.experiments.ablation import ablation_from_warehouse

    seed_list = parse_seeds(seeds)
    matrix = ablation_from_warehouse(model_name, seed_list)
    click.echo(matrix.table())
