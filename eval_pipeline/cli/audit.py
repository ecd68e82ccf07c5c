"""`evalp audit`: re-derive every referenced number of a report."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import click

from eval_pipeline import paths


@click.command()
@click.argument("path", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--quiet", is_flag=True, help="Print only the problems and the verdict.")
def audit(path: Path, quiet: bool) -> None:
    """Re-derive every referenced number of a report (or the README) from the stored runs
    and print its chain; exit 1 naming every number that does not re-derive exactly, every
    reference that leads nowhere and every number without a reference."""
    from eval_pipeline.audit.audit import audit_against_project

    os.environ["DAGSTER_HOME"] = str(paths.prepared_dagster_home())
    result = audit_against_project(path.read_text(encoding="utf-8"))
    if not quiet:
        for number in result.numbers:
            mark = "ok " if number.derived == number.printed else "BAD"
            click.echo(f"{mark} {number.printed:>7} {number.ref}: {number.chain}")
    for problem in result.problems:
        click.echo(f"problem: {problem}", err=True)
    click.echo(
        f"{path}: {len(result.numbers)} referenced numbers, "
        + ("all re-derived exactly" if result.clean else f"{len(result.problems)} problem(s)")
    )
    if not result.clean:
        sys.exit(1)
