"""The meter equals the simulated provider's bill to the cent over a whole run.

The run crosses the tier change date (intro tier at 2/3 of sticker, then sticker) and
mixes conversations, faults that are not billed and replies cut off at max_tokens. A meter
with an undated sticker table (the field report's bug) is off by the intro discount.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from datetime import date
from decimal import Decimal
from pathlib import Path

from eval_pipeline.project_configs import load_price_book
from eval_pipeline.providers.envelope import CallEnvelope
from eval_pipeline.providers.harness import CallTag
from eval_pipeline.providers.types import Message, ModelRequest
from eval_pipeline.sim.process import SimHandle
from eval_pipeline_tests.providers.conftest import (
    AFTER_TIER_CHANGE,
    BEFORE_TIER_CHANGE,
    LOOKUP,
    new_session,
    sim_config,
)

CENT = Decimal("0.01")


async def whole_run(sim: SimHandle, tmp_path: Path) -> list[CallEnvelope]:
    today = {"day": BEFORE_TIER_CHANGE}

    def clock() -> date:
        return today["day"]

    async with new_session(tmp_path, clock=clock) as session:
        models = [
            session.client(sim_config(sim, "tool-responder")),
            session.client(sim_config(sim, "tool-responder", api="anthropic_messages")),
            session.client(sim_config(sim, "flaky")),
        ]

        async def conversation(n: int) -> None:
            client = models[n % len(models)]
            messages = [Message(role="user", content=f"Find record {n} by id ART-{n:04d}")]
            for turn in range(3):
                request = ModelRequest(
                    messages=tuple(messages), tools=(LOOKUP,), max_tokens=40 + n % 7, seed=n
                )
                result = await client.call(request, CallTag(lane="p", case_id=str(n), turn=turn))
                response = result.response
                if result.status != "ok" or response is None or response.truncated:
                    return
                if not response.tool_calls:
                    return
                messages.append(Message(role="assistant", tool_calls=response.tool_calls[:1]))
                messages.append(
                    Message(
                        role="tool",
                        tool_call_id=response.tool_calls[0].id,
                        content=f"record {n}: {'x' * (400 + 10 * n)}",
                    )
                )

        for day in (BEFORE_TIER_CHANGE, AFTER_TIER_CHANGE):
            today["day"] = day
            sim.set_clock(day)
            await asyncio.gather(*(conversation(n) for n in range(40)))
        return session.envelopes


def test_metered_cost_equals_the_bill_across_a_tier_change(sim: SimHandle, tmp_path: Path) -> None:
    envelopes = asyncio.run(whole_run(sim, tmp_path))
    bill = sim.bill()
    metered = sum((e.cost_usd for e in envelopes if e.cost_usd is not None), Decimal(0))
    billed = sum((Decimal(line.cost_usd) for line in bill), Decimal(0))
    assert metered.quantize(CENT) == billed.quantize(CENT)
    assert metered == billed  # in fact to the last digit
    tiers = Counter(e.price_tier for e in envelopes if e.cost_usd is not None)
    assert tiers == Counter(line.tier_id for line in bill)
    assert set(tiers) == {"sim-intro", "sim-sticker"}
    # the run had unbilled faults and billed truncations, and metered neither wrongly
    assert any(e.status == "retried" for e in envelopes)
    assert any(e.stop_kind == "max_tokens" and e.cost_usd is not None for e in envelopes)
    assert any(e.http_status == 200 and e.cost_usd is None for e in envelopes)

    sticker = load_price_book().tier("tool-responder", AFTER_TIER_CHANGE).usd_per_mtok
    naive = sum(
        (
            ((e.input_tokens or 0) * sticker.input + (e.output_tokens or 0) * sticker.output)
            / 1_000_000
            for e in envelopes
            if e.cost_usd is not None
        ),
        Decimal(0),
    )
    assert naive.quantize(CENT) != billed.quantize(CENT)  # the undated table is caught
