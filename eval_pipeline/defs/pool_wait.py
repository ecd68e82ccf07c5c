"""A step waiting for a pool slot sleeps until its next claim, instead of spinning a core.

Dagster 1.13 (`InstanceConcurrencyContext.interval_to_next_pending_claim_check`) returns
``min([0, *(ready_at - now)])``: never above 0. The in-process executor's loop sleeps that
long when no step can start, so a run whose next step waits for a slot of the `warehouse`
pool (limit 1) re-enters the loop without sleeping, thousands of times a second, until its
claim's next check (1 s, growing to 15 s) comes round: one whole CPU core per waiting run,
the moment a night's lanes runs end together and queue on the warehouse. On these 2 cores,
a 4-partition sweep's run workers spent a quarter of their samples in that loop (py-spy).
Upstream: dagster-io/dagster#20367 spotted it ("we would always end up sleeping 0 for
concurrency checks") and was closed unmerged.

`fix_pool_wait()` gives the class the interval its callers expect: the time until the
earliest pending claim may be checked again, never below 0. When a claim is checked does
not change (the claim itself still decides that); only the spinning in between goes. The
method has one caller, the in-process plan loop's sleep, where nothing else is in flight.
It is applied when this package's jobs are defined, so every process that runs them (a run
worker, `execute_in_process`) has it.
"""

from __future__ import annotations

import time

from dagster._core.execution.plan.instance_concurrency_context import (
    InstanceConcurrencyContext,
)


def interval_to_next_pending_claim_check(self: InstanceConcurrencyContext) -> float:
    """Seconds until the earliest pending claim's next check (0: one is due now)."""
    # Dagster's own attributes, read as its method reads them.
    pending: set[str] = self._pending_claims
    ready_at: dict[str, float] = self._pending_timeouts
    due = [ready_at[step] for step in pending if step in ready_at]
    if not due:
        return 0.0
    return max(0.0, min(due) - time.time())


DAGSTER_INTERVAL = InstanceConcurrencyContext.interval_to_next_pending_claim_check
"""Dagster's own method, kept so a test can tell when an upgrade has fixed it upstream."""


def fix_pool_wait() -> None:
    """Replace Dagster's interval (idempotent)."""
    InstanceConcurrencyContext.interval_to_next_pending_claim_check = (  # type: ignore[method-assign]
        interval_to_next_pending_claim_check
    )
