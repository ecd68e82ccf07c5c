"""How many lane runs may call one provider at once, and so each run's share of its calls.

A model config's `max_in_flight` is the provider's limit, not one process's: lane runs of
several partitions run at once (Dagster's run queue starts them, on this machine or on many),
and each run bounds its own calls. The run queue starts at most `runs_at_once(provider)`
runs tagged with a provider (`tag_concurrency_limits` on the run tag `evalp/provider`, in the
local instance's dagster.yaml and in deploy/dagster.yaml alike), and each run keeps at most
`calls_in_flight_per_run` calls in flight, so all of them together never exceed the config's
limit. The queue's record of running runs is the limit shared between processes, on one
machine or many. When every run is on this machine (Dagster's default run launcher, or in
process) the runs share the provider's whole limit instead (`call_slots.MachineSlots`): a
run then takes the slots the others leave idle, and the queue's limits only bound how many
runs start.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

PROVIDER_TAG = "evalp/provider"
"""The run tag naming the provider a lane run calls (set by whatever requests the run)."""
PARTITION_TAG = "dagster/partition"
RUNS_AT_ONCE = 8
"""Runs of any kind the queue runs at once."""
RUNS_AT_ONCE_BY_PROVIDER: Mapping[str, int] = {"anthropic": 2, "openai": 2, "ollama-local": 1}
"""Hosted providers: few runs, each with a larger share of the provider's limit; a local
model server (one model in memory, a few calls at once) one run at a time."""
RUNS_AT_ONCE_PER_OTHER_PROVIDER = RUNS_AT_ONCE
"""Any other provider (the simulated one on loopback), counted per provider. A run tag
matches both this limit and its provider's own one, and the queue keeps the lower."""


def runs_at_once(provider: str) -> int:
    """The most lane runs against `provider` the run queue starts at once."""
    return min(
        RUNS_AT_ONCE_BY_PROVIDER.get(provider, RUNS_AT_ONCE_PER_OTHER_PROVIDER),
        RUNS_AT_ONCE_PER_OTHER_PROVIDER,
        RUNS_AT_ONCE,
    )


def calls_in_flight_per_run(provider: str, max_in_flight: int) -> int:
    """One run's share of the provider's `max_in_flight`: with as many runs as the queue
    allows, their calls in flight add up to at most the provider's limit. A run gets at
    least one, so a limit below `runs_at_once(provider)` is exceeded up to that many calls;
    such a provider needs a queue limit of its own in `RUNS_AT_ONCE_BY_PROVIDER`."""
    return max(1, max_in_flight // runs_at_once(provider))


def run_queue_limits() -> list[dict[str, Any]]:
    """The run queue's `tag_concurrency_limits`, as dagster.yaml spells them."""
    return [
        # One run per partition at a time: two runs of one model|seed partition would both
        # run its unfinished cases (the same calls paid twice).
        {"key": PARTITION_TAG, "value": {"applyLimitPerUniqueValue": True}, "limit": 1},
        *(
            {"key": PROVIDER_TAG, "value": provider, "limit": limit}
            for provider, limit in sorted(RUNS_AT_ONCE_BY_PROVIDER.items())
        ),
        {
            "key": PROVIDER_TAG,
            "value": {"applyLimitPerUniqueValue": True},
            "limit": RUNS_AT_ONCE_PER_OTHER_PROVIDER,
        },
    ]
