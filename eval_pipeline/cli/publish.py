"""`evalp publish`: the latest sweep report's results table into a README."""

from __future__ import annotations

from pathlib import Path

import click

from eval_pipeline import paths


@click.command()
@click.option(
    "--readme",
    "readme",
    type=click.Path(dir_okay=False, path_type=Path),
    is_flag=False,
    flag_value=str(paths.PROJECT_ROOT / "README.md"),
    required=True,
    help="The README whose results block gets the table (given alone: the project's).",
)
def publish(readme: Path) -> None:
    """Write the latest sweep report's results table into a README's results block, only
    while that report is current (refused, nothing written, when it is stale or missing).
    `evalp audit README.md` re-derives every number of it."""
    from eval_pipeline.dagster_client.publish import publish_readme

    published = publish_readme(readme)
    click.echo(
        f"results table {'updated' if published.changed else 'unchanged'} in "
        f"{published.readme} (from the sweep report of Dagster run {published.report_run_id}; "
        f"`evalp audit {Path(published.readme).name}` re-derives it)"
    )
