"""A provider's `max_in_flight` holds across the lane runs Dagster's queue runs at once: the
queue bounds the runs per provider, each run takes its share, and the local instance and the
deployed one read the same limits."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
import yaml

from eval_pipeline import paths
from eval_pipeline.project_configs import load_price_book
from eval_pipeline.providers.call_slots import RunSlots
from eval_pipeline.providers.config import ModelConfig
from eval_pipeline.providers.harness import CallSession
from eval_pipeline.providers.run_limits import (
    RUNS_AT_ONCE,
    RUNS_AT_ONCE_BY_PROVIDER,
    calls_in_flight_per_run,
    run_queue_limits,
    runs_at_once,
)

DEPLOY = paths.PROJECT_ROOT / "deploy"


def _queue(config: dict[str, object]) -> tuple[int, list[object]]:
    runs = config["concurrency"]["runs"]  # type: ignore[index]
    limits = sorted(runs["tag_concurrency_limits"], key=repr)
    return runs["max_concurrent_runs"], limits


@pytest.mark.parametrize("path", ["dagster.yaml", "k8s/dagster.yaml"])
def test_the_local_instance_queues_runs_with_the_deployed_limits(path: str) -> None:
    local = yaml.safe_load(paths.dagster_yaml())
    deployed = yaml.safe_load((DEPLOY / path).read_text(encoding="utf-8"))
    assert local["run_coordinator"]["class"] == "QueuedRunCoordinator"
    assert _queue(local) == _queue(deployed) == (RUNS_AT_ONCE, sorted(run_queue_limits(), key=repr))


@pytest.mark.parametrize("path", ["dagster.yaml", "k8s/dagster.yaml"])
def test_the_queue_launches_as_many_runs_at_once_as_it_allows(path: str) -> None:
    """One launching thread per run the queue allows: a wave of partitions starts together."""
    local = yaml.safe_load(paths.dagster_yaml())
    deployed = yaml.safe_load((DEPLOY / path).read_text(encoding="utf-8"))
    for config in (local, deployed):
        queue = config["run_coordinator"]["config"]
        assert queue["dequeue_use_threads"] is True
        assert queue["dequeue_num_workers"] == RUNS_AT_ONCE


@pytest.mark.parametrize(
    "provider", ["anthropic", "openai", "simulated", "ollama-local", "another"]
)
@pytest.mark.parametrize("max_in_flight", [8, 9, 16, 17, 64, 1024])
def test_the_runs_the_queue_allows_never_exceed_the_providers_limit_together(
    provider: str, max_in_flight: int
) -> None:
    share = calls_in_flight_per_run(provider, max_in_flight)
    assert share >= 1
    assert runs_at_once(provider) * share <= max_in_flight
    # and no more is left unused than one run's rounding
    assert max_in_flight - runs_at_once(provider) * share < runs_at_once(provider)


def test_a_hosted_provider_has_a_run_limit_of_its_own() -> None:
    assert runs_at_once("anthropic") == RUNS_AT_ONCE_BY_PROVIDER["anthropic"] == 2
    assert runs_at_once("ollama-local") == 1
    assert runs_at_once("simulated") == runs_at_once("another") == RUNS_AT_ONCE == 8


def test_a_sessions_calls_in_flight_are_its_runs_share(tmp_path: Path) -> None:
    """A queued run that may sit on another machine keeps its share of the limit; a limit
    given to the session itself (a test, a one-off script) is taken as is."""
    config = ModelConfig(
        name="m",
        api="anthropic_messages",
        provider="anthropic",
        model="m",
        api_key_env="ANTHROPIC_API_KEY",
        max_in_flight=16,
    )
    session = CallSession(
        price_book=load_price_book(),
        run_id="r",
        journal_path=tmp_path / "j.jsonl",
        slots=RunSlots(share=True),
    )
    assert asyncio.run(_free_slots(session, config)) == 16 // runs_at_once("anthropic") == 8
    given = CallSession(
        price_book=load_price_book(),
        run_id="r",
        journal_path=tmp_path / "k.jsonl",
        provider_limits={"anthropic": 3},
    )
    assert asyncio.run(_free_slots(given, config)) == 3


async def _free_slots(session: CallSession, config: ModelConfig) -> int:
    slots = session.slot(config)
    taken = 0
    while not slots.locked():
        await slots.acquire()
        taken += 1
    return taken
