"""A quick run of both lanes on a subset of the cases (`evalp demo` and `evalp sweep` with
--cases, --categories or --limit)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import click

from eval_pipeline import paths
from eval_pipeline.cli.common import fail

if TYPE_CHECKING:
    from eval_pipeline.experiments.subset import CaseSelection


def run_subset(names: Sequence[str], seeds: Sequence[int], selection: CaseSelection) -> None:
    """A quick run of both lanes on the selected cases, printed; exits 1 when a case got no
    usable reply (‡)."""
    from eval_pipeline import world_stages
    from eval_pipeline.experiments.subset import RESULT_FILE, run_subset, subset_root
    from eval_pipeline.lanes.agent_db import build_agent_world_db
    from eval_pipeline.lanes.guards import GuardSettings, guards_from_env
    from eval_pipeline.lanes.sweep_config import load_sweep_config
    from eval_pipeline.project_configs import scan_model_configs
    from eval_pipeline.scoring.judge import load_judge
    from eval_pipeline.scoring.score import UNHEARD

    judge = load_judge()
    configs = scan_model_configs().require([*names, judge.model])
    warehouse = paths.warehouse_path()
    fixture_set = world_stages.current_fixture_set(warehouse)
    result = run_subset(
        models=names,
        seeds=seeds,
        selection=selection,
        fixture_set=fixture_set,
        agent_db=build_agent_world_db(warehouse, paths.agent_world_dir()),
        configs=configs,
        judge=judge,
        guards=guards_from_env(GuardSettings()),
        product=load_sweep_config().product,
    )
    click.echo(result.text())
    click.echo(f"\nrecords and result: {subset_root(result.run_id) / RESULT_FILE}")
    unheard = [s for s in result.scores if s.status in UNHEARD]
    if unheard:
        fail(f"{len(unheard)} case run(s) got no usable reply (‡): see the table above", code=1)
