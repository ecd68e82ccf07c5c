"""A run whose step waits for a warehouse pool slot sleeps until its claim's next check
(`defs.pool_wait`), on the local instance's own pool settings."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import dagster as dg
import pytest
from dagster._core.execution.plan import instance_concurrency_context as concurrency_context
from dagster._core.execution.plan.instance_concurrency_context import (
    InstanceConcurrencyContext,
)

import eval_pipeline.defs.jobs  # noqa: F401 - what applies the fix when the jobs load
from eval_pipeline import paths
from eval_pipeline.defs import pool_wait
from eval_pipeline.defs.keys import WAREHOUSE_POOL
from eval_pipeline.defs.pool_wait import DAGSTER_INTERVAL


@pytest.fixture
def instance(isolated_state: Path) -> Iterator[dg.DagsterInstance]:
    paths.prepared_dagster_home()
    with dg.DagsterInstance.get() as instance:
        yield instance


def _run(instance: dg.DagsterInstance) -> dg.DagsterRun:
    return instance.create_run_for_job(
        dg.GraphDefinition(name="g", node_defs=[]).to_job(name="waiting"), run_config={}
    )


class _FrozenClock:
    def __init__(self, now: float) -> None:
        self.now = now

    def time(self) -> float:
        return self.now


def test_a_step_waiting_for_the_warehouse_sleeps_until_its_next_check(
    instance: dg.DagsterInstance, monkeypatch: pytest.MonkeyPatch
) -> None:
    holder, waiter = _run(instance), _run(instance)
    with (
        InstanceConcurrencyContext(instance, holder) as holding,
        InstanceConcurrencyContext(instance, waiter) as waiting,
    ):
        assert holding.claim(WAREHOUSE_POOL, "lane_warehouse")  # the pool's one slot
        assert not waiting.claim(WAREHOUSE_POOL, "lane_warehouse")
        assert waiting.has_pending_claims()
        # Dagster checks the claim again in about a second; 0.75 s before that check the
        # plan loop sleeps 0.75 s (Dagster's own interval is 0: the loop spun a core).
        (check_at,) = waiting._pending_timeouts.values()
        clock = _FrozenClock(check_at - 0.75)
        monkeypatch.setattr(pool_wait, "time", clock)
        monkeypatch.setattr(concurrency_context, "time", clock)
        assert waiting.interval_to_next_pending_claim_check() == pytest.approx(0.75)
        assert DAGSTER_INTERVAL(waiting) == 0
        clock.now = check_at + 0.1  # overdue: no sleep
        assert waiting.interval_to_next_pending_claim_check() == 0.0
        holding.free_step("lane_warehouse")


def test_no_pending_claim_means_no_sleep(instance: dg.DagsterInstance) -> None:
    with InstanceConcurrencyContext(instance, _run(instance)) as context:
        assert context.claim(WAREHOUSE_POOL, "lane_warehouse")
        assert context.interval_to_next_pending_claim_check() == 0.0
