"""The config files as observable source assets: their versions make assets stale."""

from __future__ import annotations

import warnings

import dagster as dg

from eval_pipeline.config_versions import CONFIG_FAMILIES, config_version
from eval_pipeline.defs.keys import CONFIGS_GROUP, OBSERVE_CONFIGS_JOB


def _source(family: str, description: str) -> dg.SourceAsset:
    # `observable_source_asset` is beta in Dagster 1.13: its warning would print on every
    # command that loads the definitions.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", dg.BetaWarning)

        @dg.observable_source_asset(name=family, group_name=CONFIGS_GROUP, description=description)
        def observe() -> dg.DataVersion:
            return dg.DataVersion(config_version(family))

    return observe


config_sources = [_source(family, about) for family, (about, _) in CONFIG_FAMILIES.items()]

# Selected by key: a group selection leaves source assets out (the job then observed
# nothing, and no edited config ever made an asset stale).
observe_configs_job = dg.define_asset_job(
    OBSERVE_CONFIGS_JOB,
    selection=dg.AssetSelection.assets(*(source.key for source in config_sources)),
    description="Observe the config files' versions (the main job runs it first).",
    executor_def=dg.in_process_executor,
)
