"""`evalp compare`: who leads and by how much, from the stored scores."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from eval_pipeline import paths
from eval_pipeline.cli.common import parse_seeds

if TYPE_CHECKING:
    from eval_pipeline.scoring.compare import StoredComparison


@click.command()
@click.argument("candidate")
@click.argument("reference")
@click.option(
    "--lane",
    type=click.Choice(["model", "product"]),
    default="product",
    show_default=True,
    help="The lane of a side given as MODEL (MODEL:LANE names its own).",
)
@click.option("--seeds", default="", help="Only these stored seeds, e.g. 0,1 (default: all).")
def compare(candidate: str, reference: str, lane: str, seeds: str) -> None:
    """Who leads and by how much: CANDIDATE − REFERENCE over the cases both scored, each a
    stored model (MODEL, or MODEL:LANE to compare across lanes), with the paired bootstrap
    interval, McNemar's test, the seed noise floor and the gap per category."""
    from eval_pipeline.scoring.compare import StoredSide, compare_stored
    from eval_pipeline.scoring.score_tables import read_scores
    from eval_pipeline.warehouse import connect

    chosen = parse_seeds(seeds) if seeds else []
    sides = [StoredSide.parse(text, lane, chosen) for text in (candidate, reference)]
    conn = connect(paths.warehouse_path(), read_only=True)
    try:
        stored = compare_stored(read_scores(conn), *sides)
    finally:
        conn.close()
    _echo_comparison(stored)


def _echo_comparison(stored: StoredComparison) -> None:
    c = stored.comparison
    click.echo(c.sentence())
    paired = c.paired
    click.echo(
        f"  McNemar (exact, majority vote per case): {stored.candidate.label} only "
        f"{paired.candidate_only}, {stored.reference.label} only {paired.reference_only}"
    )
    for side, seeds, noise in (
        (stored.candidate, c.candidate_seeds, c.candidate_noise),
        (stored.reference, c.reference_seeds, c.reference_noise),
    ):
        shown = "unknown (one seed)" if noise is None else f"±{noise:.1f}"
        click.echo(
            f"  {side.label}: seeds {','.join(map(str, seeds))}, seed noise {shown}, "
            f"{paired.left_out.get(side.label, 0)} case(s) left out (never heard or "
            "budget-stopped)"
        )
    if stored.candidate_fixtures != stored.reference_fixtures:
        click.echo(
            f"  fixture sets differ: {', '.join(stored.candidate_fixtures)} vs "
            f"{', '.join(stored.reference_fixtures)}; paired on the {paired.shared_cases} "
            "case ids both hold"
        )
    else:
        click.echo(f"  fixture set {', '.join(stored.candidate_fixtures)}")
    if stored.categories:
        click.echo("Per category (paired, points; Δ = candidate − reference):")
        width = max(len(g.category) for g in stored.categories)
        for g in stored.categories:
            click.echo(
                f"  {g.category:<{width}}  n {g.shared:>4}  {g.reference:6.1f} → "
                f"{g.candidate:6.1f}  Δ {g.difference:+6.1f} [{g.low:+.1f}, {g.high:+.1f}]"
            )
