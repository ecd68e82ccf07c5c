"""`evalp show`: why a case passed or failed, from its stored transcript."""

from __future__ import annotations

import click

from eval_pipeline import paths
from eval_pipeline.cli.common import SEED_RANGE


@click.command()
@click.argument("case_id")
@click.option("--model", "model_name", required=True, help="A model with stored runs.")
@click.option(
    "--lane",
    type=click.Choice(["model", "product"]),
    default="product",
    show_default=True,
)
@click.option("--seed", "seeds", multiple=True, type=SEED_RANGE, help="Only this seed (repeat).")
def show(case_id: str, model_name: str, lane: str, seeds: tuple[int, ...]) -> None:
    """Why a case passed or failed: its stored transcript for the model in the lane (every
    stored seed, or --seed): the prompt, every reply, tool call and result, guard firing
    and write, the final reply beside the expected answer, each tier's score, the cost."""
    from eval_pipeline import world_stages
    from eval_pipeline.cases.frozen import load_fixtures
    from eval_pipeline.report.transcript import show_case, transcript_text
    from eval_pipeline.scoring.score_tables import read_scores
    from eval_pipeline.warehouse import connect

    conn = connect(paths.warehouse_path(), read_only=True)
    try:
        fixture_set = load_fixtures(world_stages.recorded_fixture_path(conn))
        cases = {case.case_id: case for case in fixture_set.cases}
        scores = [s for s in read_scores(conn) if s.fixture_id == fixture_set.fixture_id]
        transcripts = show_case(conn, cases, scores, case_id, model_name, lane, seeds)
    finally:
        conn.close()
    click.echo("\n\n".join(transcript_text(t) for t in transcripts))
