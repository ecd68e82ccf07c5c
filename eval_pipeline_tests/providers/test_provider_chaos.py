"""Chaos: 200 calls, 64 in flight, every fault at once, under a cap reached mid-run.

Through the simulated provider over real HTTP, in both wire formats: connection drops,
429s, 5xx, empty and malformed bodies, replies cut off at the limit, replies slower than
the client's timeout (billed by the server all the same), output limits raised through
`extra`, and prompt-cache reads and writes in the usage (writes priced above input).
What must hold: landed spend within the cap; the server's own bill within the cap plus
the worst case of what was in flight at the stop; exactly one final envelope per call;
nothing left reserved or waiting.
"""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from eval_pipeline.providers.budget import BudgetGate
from eval_pipeline.providers.config import RetryPolicy
from eval_pipeline.providers.envelope import read_journal
from eval_pipeline.providers.harness import CallResult, CallTag
from eval_pipeline.providers.types import Message, ModelRequest
from eval_pipeline.sim.process import SimHandle, running_sim
from eval_pipeline_tests.providers.conftest import (
    BEFORE_TIER_CHANGE,
    LOOKUP,
    new_session,
    sim_config,
)

CALLS = 200
IN_FLIGHT = 64
CAP = Decimal("0.06")
CHAOS: dict[str, Any] = {
    "drop": 0.06,
    "rate_limit": 0.06,
    "server_error": 0.06,
    "empty_body": 0.03,
    "malformed_json": 0.03,
    "truncated": 0.10,
    "slow": 0.10,
    "slow_ms": 1200,
    "retry_after_s": 0,
    "retry_after_ms": 5,
    "cache_read": 0.4,
    "cache_write": 0.2,
}
RETRY = RetryPolicy(max_attempts=3, base_delay_s=0.01, max_delay_s=0.05, max_total_s=5)


@pytest.fixture(scope="module")
def chaos_sim() -> Iterator[SimHandle]:
    with running_sim(seed=11, profile_options={"flaky:chaos": CHAOS}) as handle:
        handle.set_clock(BEFORE_TIER_CHANGE)
        yield handle


def chaos_request(n: int, api: str) -> ModelRequest:
    extra: dict[str, Any] = {}
    if n % 5 == 0:  # an output limit far above max_tokens, through `extra`
        extra = {"max_completion_tokens" if api == "openai_compatible" else "max_tokens": 300}
    return ModelRequest(
        messages=(Message(role="user", content=f"Chaos case {n}: look up ART-{n:04d}"),),
        tools=(LOOKUP,) if n % 3 == 0 else (),
        max_tokens=16 if extra else 32,
        seed=n,
        extra=extra,
    )


def test_chaos_holds_the_cap_and_leaves_one_final_envelope_per_call(
    chaos_sim: SimHandle, tmp_path: Path
) -> None:
    chaos_sim.reset()
    gate = BudgetGate(CAP)
    apis = ("openai_compatible", "anthropic_messages")
    configs = {
        api: sim_config(
            chaos_sim,
            "flaky:chaos",
            api=api,
            max_in_flight=IN_FLIGHT,
            timeout_s=0.4,
            retry=RETRY,
        )
        for api in apis
    }

    async def run() -> list[CallResult]:
        async with new_session(
            tmp_path, budget=gate, provider_limits={"simulated": IN_FLIGHT}
        ) as session:
            clients = {api: session.client(config) for api, config in configs.items()}
            calls = [
                clients[apis[n % 2]].call(
                    chaos_request(n, apis[n % 2]), CallTag(lane="chaos", case_id=f"c{n:03d}")
                )
                for n in range(CALLS)
            ]
            # Nothing may wait forever: the whole run has a deadline.
            return list(await asyncio.wait_for(asyncio.gather(*calls), timeout=120))

    results = asyncio.run(run())
    envelopes = [e for r in results for e in r.envelopes]

    landed = sum((e.cost_usd or Decimal(0) for e in envelopes), Decimal(0))
    assert landed <= CAP
    state = gate.state()
    assert state.reserved_usd == 0 and state.in_flight == 0, "nothing left reserved"
    assert state.landed_usd <= CAP
    # Nothing is in flight at the stop (every call returned), so the server's own bill,
    # which includes the replies the client timed out on, must be within the cap itself.
    billed = sum(Decimal(line.cost_usd) for line in chaos_sim.bill())
    in_flight_at_stop = Decimal(0)
    assert billed <= CAP + in_flight_at_stop, f"server billed {billed} against {CAP}"
    for envelope in envelopes:
        if envelope.cost_usd is not None:
            assert envelope.reserved_usd is not None
            assert envelope.cost_usd <= envelope.reserved_usd, envelope.envelope_id

    statuses = Counter(r.status for r in results)
    assert statuses["ok"] and statuses["budget_stopped"], f"cap reached mid-run: {statuses}"
    causes = Counter(e.failure_cause for e in envelopes)
    for cause in ("timeout", "connect", "429", "5xx"):
        assert causes[cause], f"no {cause} in the mix: {causes}"
    raised = [e for e in envelopes if e.case_id.endswith("0") or e.case_id.endswith("5")]
    assert raised and all(json.loads(e.request_json)["max_tokens"] == 300 for e in raised)
    cached = [
        e
        for e in envelopes
        if e.response_json and '"cache_write_tokens":0' not in (e.response_json)
    ]
    assert cached, "cache writes were reported and priced"

    journal = list(read_journal(tmp_path / "runs" / "run-1" / "envelopes.jsonl"))
    finals = Counter(e.call_id for e in journal if e.final)
    assert len(finals) == CALLS and set(finals.values()) == {1}
    assert {e.call_id for e in journal} == {r.call_id for r in results}
    assert not [e for e in journal if e.failure_cause == "interrupted"]
    assert sorted(e.envelope_id for e in journal) == sorted(e.envelope_id for e in envelopes)
