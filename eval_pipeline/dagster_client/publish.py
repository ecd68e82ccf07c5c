"""`evalp publish --readme`: the latest sweep report's results table written into a README.

Only when asked: running the main job never edits a file of the checkout. The table is
published only while the report it comes from is current (no config, code version or
input it depends on changed since), so a README never shows a stale number as current.
"""

from __future__ import annotations

import os
from pathlib import Path

import dagster as dg

from eval_pipeline import paths
from eval_pipeline.dagster_client import up_to_date
from eval_pipeline.defs.keys import SWEEP_REPORT_ASSET
from eval_pipeline.errors import EvalPipelineError
from eval_pipeline.records import FrozenRecord
from eval_pipeline.report.readme import update_results


class PublishError(EvalPipelineError):
    """There is no current sweep report to publish from."""


class PublishedTable(FrozenRecord):
    readme: str
    changed: bool
    report_run_id: str
    """The Dagster run whose sweep report the table comes from."""


def publish_readme(readme: Path) -> PublishedTable:
    """Write the latest sweep report's results table into `readme`'s results block;
    refused (nothing written) when there is no report, or it is stale."""
    from eval_pipeline.dagster_client.launch import QUIET
    from eval_pipeline.definitions import defs
    from eval_pipeline.defs.report_assets import ReportFigures

    os.environ["DAGSTER_HOME"] = str(paths.prepared_dagster_home())
    key = dg.AssetKey(SWEEP_REPORT_ASSET)
    with dg.DagsterInstance.get() as instance:
        event = instance.get_latest_materialization_event(key)
        if event is None or event.asset_materialization is None:
            raise PublishError(
                f"no sweep report in the Dagster instance at {paths.dagster_home()}: run "
                "`evalp demo` (or `evalp sweep`) first"
            )
        up_to_date.observe_configs(defs, instance, QUIET)
        stale = up_to_date.stale_upstream(defs, instance, key)
        if stale:
            shown = ", ".join(stale[:6]) + (f" and {len(stale) - 6} more" if len(stale) > 6 else "")
            raise PublishError(
                f"the latest sweep report (Dagster run {event.run_id}) is stale: a config, "
                f"code version or input changed since for {shown}; run `evalp demo` (or "
                "`evalp sweep`) first, then publish"
            )
        report = ReportFigures.of(event.asset_materialization.metadata)
    source = Path(report.readme_table)
    try:
        text = source.read_text(encoding="utf-8")
    except OSError as error:
        raise PublishError(
            f"{source}: the README table of the sweep report of Dagster run {event.run_id} "
            f"cannot be read ({error.strerror}); run `evalp demo` again"
        ) from error
    changed = update_results(readme, text)
    return PublishedTable(readme=str(readme), changed=changed, report_run_id=event.run_id)
