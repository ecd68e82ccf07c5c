"""The config files are observed: the observation job records each family's version, so an
edited config makes what reads it stale (the observation job once selected no asset at
all, by a group selection that leaves source assets out, and nothing ever went stale)."""

from __future__ import annotations

from pathlib import Path

import dagster as dg
import pytest

from eval_pipeline import paths
from eval_pipeline.config_versions import CONFIG_FAMILIES, config_version
from eval_pipeline.definitions import defs
from eval_pipeline.defs.keys import OBSERVE_CONFIGS_JOB


def observed(instance: dg.DagsterInstance) -> dict[str, str | None]:
    versions = {}
    for family in CONFIG_FAMILIES:
        records = instance.fetch_observations(dg.AssetKey(family), limit=1).records
        observation = records[0].asset_observation if records else None
        versions[family] = None if observation is None else observation.data_version
    return versions


def test_observing_the_configs_records_every_familys_version_and_an_edit_moves_it(
    isolated_state: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    job = defs.resolve_job_def(OBSERVE_CONFIGS_JOB)
    with dg.DagsterInstance.ephemeral() as instance:
        assert job.execute_in_process(instance=instance).success
        assert observed(instance) == {family: config_version(family) for family in CONFIG_FAMILIES}
        prices = isolated_state / "prices.yaml"
        prices.write_text(paths.prices_path().read_text() + "\n# edited\n")
        monkeypatch.setenv("EVALP_PRICES", str(prices))
        before = observed(instance)
        assert job.execute_in_process(instance=instance).success
        after = observed(instance)
    assert {family for family in CONFIG_FAMILIES if after[family] != before[family]} == {
        "price_book"
    }
