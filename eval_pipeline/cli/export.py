"""`evalp export`: the stored sweep in another tool's format."""

from __future__ import annotations

from pathlib import Path

import click

from eval_pipeline import paths


@click.group()
def export() -> None:
    """The stored sweep in another tool's format."""


@export.command("inspect")
@click.option(
    "--out",
    "out",
    type=click.Path(file_okay=False, path_type=Path),
    required=True,
    help="The folder the logs are written to (`inspect view --log-dir` it).",
)
def export_inspect_logs(out: Path) -> None:
    """Every lane and model of the current fixture set as an Inspect AI log (samples,
    messages, scores, model usage), so `inspect view --log-dir OUT` browses the sweep."""
    from eval_pipeline import world_stages
    from eval_pipeline.cases.frozen import load_fixtures
    from eval_pipeline.lanes.lane_tables import read_identities
    from eval_pipeline.report.inspect_export import export_inspect
    from eval_pipeline.scoring.score_tables import read_scores
    from eval_pipeline.warehouse import connect

    conn = connect(paths.warehouse_path(), read_only=True)
    try:
        fixture_set = load_fixtures(world_stages.recorded_fixture_path(conn))
        scores = [s for s in read_scores(conn) if s.fixture_id == fixture_set.fixture_id]
        logs = export_inspect(conn, fixture_set, scores, read_identities(conn), out)
    finally:
        conn.close()
    for log in logs:
        click.echo(
            f"{log.path}: {log.lane} lane, {log.model}: {log.samples} samples, {log.scored} scored"
        )
    click.echo(f"inspect view --log-dir {out}")
