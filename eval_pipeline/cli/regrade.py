"""`evalp regrade`: re-label and re-score what is stored, without calling a model."""

from __future__ import annotations

import sys

import click

from eval_pipeline import paths


@click.command()
@click.option(
    "--show", default=40, show_default=True, help="How many changed cases to list (0: none)."
)
def regrade(show: int) -> None:
    """Re-label every stored lane call with the current classifier and readers, then
    re-score every stored lane partition with the current readers, checks and judge
    verdicts, without calling a model (the judge is asked only about replies it never
    ruled on), and say what changed and why. The re-scoring is Dagster's regrade job, one
    run per partition through the run queue: new materializations of the scores, so the
    UI shows them and the next `evalp demo` re-runs the results that read them."""
    from eval_pipeline.dagster_client.display import MissionBar
    from eval_pipeline.dagster_client.regrade import regrade_through_dagster
    from eval_pipeline.locks import project_lock
    from eval_pipeline.scoring.grading import cases_under
    from eval_pipeline.scoring.relabel import relabel_envelopes
    from eval_pipeline.warehouse import connect

    with project_lock("evalp regrade"):
        # Labels first: a case score carries the label of its final call.
        con = connect(paths.warehouse_path())
        try:
            relabelled = relabel_envelopes(
                con, cases_under(paths.fixtures_root()), max_examples=show
            )
        finally:
            con.close()
        bar = MissionBar()
        try:
            outcome = regrade_through_dagster(bar)
        finally:
            bar.close()
    for line in relabelled.lines():
        click.echo(line)
    click.echo(
        f"re-scored {outcome.scored} case runs in {len(outcome.runs)} partition run(s) of "
        f"Dagster's regrade job; judge asked {outcome.judge_asked}, stored verdicts reused "
        f"{outcome.judge_reused}"
    )
    for key in outcome.not_partitions:
        click.echo(
            f"  not re-scored: {key} is no partition of the lanes now (its seed is not "
            f"in {paths.sweep_config()}); its scores stand as they were"
        )
    if not outcome.changes:
        click.echo("no score changed")
    else:
        click.echo(f"{len(outcome.changes)} case score(s) changed:")
        for change in outcome.changes[:show]:
            click.echo(
                f"  {change.partition} {change.case_id}: {change.old} -> {change.new} "
                f"({change.responsible})"
            )
        if len(outcome.changes) > show:
            click.echo(f"  ... and {len(outcome.changes) - show} more")
    for line in outcome.dropped[:show]:
        click.echo(f"  no longer scored: {line}")
    for run in outcome.runs:
        for failure in run.failures:
            click.echo(f"FAILED {run.partition} {failure.step}: {failure.message}", err=True)
    if not outcome.success:
        sys.exit(1)
