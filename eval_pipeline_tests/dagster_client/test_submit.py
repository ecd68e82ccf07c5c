"""Lane partitions go to Dagster's run queue with one `dagster job backfill` per provider,
side by side: each run tagged with its provider, all under one request."""

from __future__ import annotations

from pathlib import Path

import dagster as dg
import pytest

from eval_pipeline import paths
from eval_pipeline.dagster_client.queue import QueueError, request_runs, submit_partitions
from eval_pipeline.defs.keys import LANES_JOB, MODELS_PARTITIONS
from eval_pipeline.providers.run_limits import PROVIDER_TAG


def _queued(request: str) -> set[tuple[str, str, str]]:
    with dg.DagsterInstance.get() as instance:
        return {
            (
                record.dagster_run.tags["dagster/partition"],
                record.dagster_run.tags[PROVIDER_TAG],
                record.dagster_run.status.value,
            )
            for record in request_runs(instance, request)
        }


def _instance_with_models(*models: str) -> None:
    paths.prepared_dagster_home()
    with dg.DagsterInstance.get() as instance:
        instance.add_dynamic_partitions(MODELS_PARTITIONS, list(models))


@pytest.mark.slow
def test_each_providers_partitions_are_queued_with_its_tag_under_one_request(
    isolated_state: Path,
) -> None:
    _instance_with_models("sim-strong", "sim-small")
    submitted = submit_partitions(
        LANES_JOB,
        {"simulated": ["sim-strong|0", "sim-strong|1"], "openai": ["sim-small|0"]},
        {"evalp/test": "submit"},
    )
    assert sorted(submitted.partitions) == ["sim-small|0", "sim-strong|0", "sim-strong|1"]
    assert _queued(submitted.request) == {
        ("sim-strong|0", "simulated", "QUEUED"),
        ("sim-strong|1", "simulated", "QUEUED"),
        ("sim-small|0", "openai", "QUEUED"),
    }


@pytest.mark.slow
def test_a_provider_whose_backfill_fails_is_named_and_the_others_runs_stay_queued(
    isolated_state: Path,
) -> None:
    _instance_with_models("sim-strong")
    with pytest.raises(QueueError, match=r"backfill of lanes \(anthropic\) failed"):
        submit_partitions(
            LANES_JOB,
            {"simulated": ["sim-strong|0"], "anthropic": ["no-such-model|0"]},
            {"evalp/test": "submit-fails"},
        )
    with dg.DagsterInstance.get() as instance:
        runs = instance.get_runs(filters=dg.RunsFilter(tags={"evalp/test": "submit-fails"}))
    assert [(run.tags["dagster/partition"], run.status) for run in runs] == [
        ("sim-strong|0", dg.DagsterRunStatus.QUEUED)
    ]
