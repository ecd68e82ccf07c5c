"""The budget holes found by trying the landed code from outside, one test each.

1. an output limit passed in `extra` raised the wire's limit past the priced one;
2. a timed-out call settled at $0 while the provider billed what it received;
3. a reply whose usage could not be priced left its reservation in flight forever;
4. the worst case priced input at the input rate, below a cache write;
5. `max_total_s` counted the time queued for a slot, so queued calls lost their retries.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from datetime import date
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from eval_pipeline.project_configs import load_price_book
from eval_pipeline.providers.budget import BudgetGate, input_token_bound, worst_case_input_tokens
from eval_pipeline.providers.config import ModelConfig
from eval_pipeline.providers.envelope import read_journal
from eval_pipeline.providers.errors import BudgetStoppedError, PriceError
from eval_pipeline.providers.harness import CallResult, CallTag
from eval_pipeline.providers.transport import AttemptOutcome, WireRequest
from eval_pipeline.providers.types import Message, ModelRequest
from eval_pipeline.providers.wire import (
    anthropic_body,
    openai_body,
    parse_anthropic_body,
    parse_openai_body,
)
from eval_pipeline.sim.process import SimHandle, running_sim
from eval_pipeline_tests.providers.conftest import (
    BEFORE_TIER_CHANGE,
    FAST_RETRY,
    KEY_ENV,
    new_session,
    sim_config,
)


def ask(n: int, max_tokens: int = 16, **fields: Any) -> ModelRequest:
    return ModelRequest(
        messages=(Message(role="user", content=f"Case {n}: repeat the word royalties"),),
        max_tokens=max_tokens,
        seed=n,
        **fields,
    )


# -- 1. output limits in `extra` ------------------------------------------------------------


@pytest.mark.parametrize(
    ("api", "override"),
    [("openai_compatible", "max_completion_tokens"), ("anthropic_messages", "max_tokens")],
)
def test_an_output_limit_in_extra_is_priced_and_recorded(
    sim: SimHandle, tmp_path: Path, api: str, override: str
) -> None:
    """Every reply is cut off at the wire's limit, so it bills that many output tokens."""
    sim.set_clock(BEFORE_TIER_CHANGE)
    config = sim_config(sim, "flaky:cut", api=api)

    async def run() -> list[CallResult]:
        async with new_session(tmp_path, budget=BudgetGate(Decimal("1"))) as session:
            client = session.client(config)
            return list(
                await asyncio.gather(
                    *(
                        client.call(
                            ask(n, max_tokens=1, extra={override: 1000}),
                            CallTag(lane="model", case_id=f"c{n}"),
                        )
                        for n in range(8)
                    )
                )
            )

    results = asyncio.run(run())
    for result in results:
        envelope = result.final
        assert envelope.output_tokens == 1000, "the sim cuts the reply at the wire's limit"
        assert envelope.cost_usd is not None and envelope.reserved_usd is not None
        assert envelope.cost_usd <= envelope.reserved_usd, envelope.envelope_id
        recorded = json.loads(envelope.request_json)
        assert recorded["max_tokens"] == 1000 and override not in recorded["extra"]
    billed = sum(Decimal(line.cost_usd) for line in sim.bill())
    assert billed <= sum(r.final.reserved_usd or 0 for r in results)


def test_extra_that_would_change_model_or_choices_is_refused() -> None:
    with pytest.raises(ValueError, match="extra\\['model'\\]"):
        ask(1, extra={"model": "a-pricier-model"})
    with pytest.raises(ValueError, match="extra\\['n'\\]"):
        ask(1, extra={"n": 4})
    assert ask(1, max_tokens=50, extra={"max_output_tokens": 20}).max_tokens == 50


# -- 2. a timed-out call may have been billed ----------------------------------------------


@pytest.fixture(scope="module")
def slow_sim() -> Iterator[SimHandle]:
    with running_sim(latency_ms=1500) as handle:
        handle.set_clock(BEFORE_TIER_CHANGE)
        yield handle


def test_timed_out_calls_count_at_their_worst_case_so_the_bill_stays_under_the_cap(
    slow_sim: SimHandle, tmp_path: Path
) -> None:
    slow_sim.reset()
    cap = Decimal("0.003")
    config = sim_config(slow_sim, "tool-responder", timeout_s=0.3, retry=FAST_RETRY)
    gate = BudgetGate(cap)

    async def run() -> list[CallResult]:
        async with new_session(tmp_path, budget=gate) as session:
            client = session.client(config)
            return list(
                await asyncio.gather(
                    *(
                        client.call(ask(n, max_tokens=64), CallTag(lane="m", case_id=f"t{n}"))
                        for n in range(24)
                    )
                )
            )

    results = asyncio.run(run())
    timeouts = [e for r in results for e in r.envelopes if e.failure_cause == "timeout"]
    assert timeouts, "the client timeout is below the server's latency"
    billed = sum(Decimal(line.cost_usd) for line in slow_sim.bill())
    assert billed > 0, "the provider bills the requests it received"
    assert billed <= cap, f"server billed {billed} against a cap of {cap}"
    state = gate.state()
    assert state.reserved_usd == 0 and state.in_flight == 0
    assert state.landed_usd == sum(e.reserved_usd or 0 for e in timeouts)
    assert any(r.status == "budget_stopped" for r in results)


# -- 3. a landed reply that cannot be priced -----------------------------------------------


class CachedUsageReply:
    """An OpenAI-compatible server (vLLM) reporting prompt-cache hits in its usage."""

    def wire_body(self, request: ModelRequest) -> dict[str, Any]:
        return openai_body(request)

    async def send(self, wire: WireRequest, request: ModelRequest) -> AttemptOutcome:
        body = json.dumps(
            {
                "id": "chatcmpl-cached",
                "choices": [{"message": {"content": "ANSWER: 1"}, "finish_reason": "stop"}],
                "usage": {
                    "prompt_tokens": 40,
                    "completion_tokens": 3,
                    "prompt_tokens_details": {"cached_tokens": 32},
                },
            }
        )
        return AttemptOutcome(
            http_status=200,
            body=body,
            cause=None,
            detail=None,
            retry_after_ms=None,
            response=parse_openai_body(body),
        )

    async def close(self) -> None:
        return None


def _uncached_only_book(tmp_path: Path) -> Path:
    """A price book whose only model has no price for cached tokens."""
    path = tmp_path / "prices.yaml"
    path.write_text(
        "models:\n  no-cache-price:\n    kind: real\n    tiers:\n"
        "      - {id: list, start: 2025-01-01, usd_per_mtok: {input: '1.00', output: '2.00'}}\n"
    )
    return path


def test_an_unpriceable_reply_is_journaled_settled_and_raised_and_no_waiter_hangs(
    tmp_path: Path,
) -> None:
    book = load_price_book(_uncached_only_book(tmp_path))
    config = ModelConfig(
        name="cached",
        api="openai_compatible",
        provider="vllm",
        model="no-cache-price",
        base_url="http://127.0.0.1:9/v1",
        api_key_env=KEY_ENV,
    )
    request = ask(1, max_tokens=8)
    wire = openai_body(request)
    worst = book.quote("no-cache-price", BEFORE_TIER_CHANGE, worst_case_input_tokens(wire), 8)
    gate = BudgetGate(worst.cost_usd * 3 / 2)  # room for one call in flight, not two

    async def run() -> str:
        async with new_session(tmp_path, price_book=book, budget=gate) as session:
            client = session.client(config, transport=CachedUsageReply())
            with pytest.raises(PriceError, match="cache_read"):
                await client.call(request, CallTag(lane="m", case_id="cached"))
            try:  # would wait forever for a reservation that is never settled
                await asyncio.wait_for(gate.acquire(worst.cost_usd), timeout=2)
            except BudgetStoppedError:
                return "refused at once"
            return "admitted"

    assert asyncio.run(run()) == "refused at once"
    state = gate.state()
    assert state.in_flight == 0 and state.reserved_usd == 0
    assert state.landed_usd == worst.cost_usd  # unpriced: its worst case is kept as spent
    [envelope] = list(read_journal(tmp_path / "runs" / "run-1" / "envelopes.jsonl"))
    assert envelope.final and envelope.status == "ok" and envelope.http_status == 200
    assert envelope.cost_usd is None and "unpriced" in (envelope.failure_detail or "")


def test_a_local_server_reporting_cached_tokens_costs_zero() -> None:
    """vLLM reports cached tokens; the local entry prices them (at zero) explicitly."""
    quote = load_price_book().quote("local-llama", date(2026, 6, 1), 10, 5, cache_read_tokens=32)
    assert quote.cost_usd == 0


def test_openai_cached_tokens_are_not_priced_twice() -> None:
    usage = parse_openai_body(CACHED_BODY).usage
    assert usage is not None
    assert (usage.input_tokens, usage.cache_read_tokens) == (8, 32)


CACHED_BODY = json.dumps(
    {
        "choices": [{"message": {"content": "ANSWER: 1"}, "finish_reason": "stop"}],
        "usage": {
            "prompt_tokens": 40,
            "completion_tokens": 3,
            "prompt_tokens_details": {"cached_tokens": 32},
        },
    }
)


# -- 4. the worst case with prompt caching --------------------------------------------------


class EveryByteACacheWrite:
    """The adversarial reply: one input token per request byte, all written to the cache,
    and the whole output limit used (Anthropic prices cache writes above input)."""

    def wire_body(self, request: ModelRequest) -> dict[str, Any]:
        return {"model": "claude-sonnet-4-5", **anthropic_body(request)}

    async def send(self, wire: WireRequest, request: ModelRequest) -> AttemptOutcome:
        body = json.dumps(
            {
                "id": "msg_worst",
                "content": [{"type": "text", "text": "ANSWER: 1"}],
                "stop_reason": "max_tokens",
                "usage": {
                    "input_tokens": 0,
                    "cache_creation_input_tokens": input_token_bound(wire.data),
                    "cache_read_input_tokens": 0,
                    "output_tokens": wire.body["max_tokens"],
                },
            }
        )
        return AttemptOutcome(
            http_status=200,
            body=body,
            cause=None,
            detail=None,
            retry_after_ms=None,
            response=parse_anthropic_body(body),
        )

    async def close(self) -> None:
        return None


def test_cache_writes_cannot_make_the_actual_cost_exceed_the_reservation(
    tmp_path: Path,
) -> None:
    config = ModelConfig(
        name="claude-worst",
        api="anthropic_messages",
        provider="anthropic-test",
        model="claude-sonnet-4-5",
        api_key_env=KEY_ENV,
    )

    async def run() -> CallResult:
        async with new_session(tmp_path, budget=BudgetGate(Decimal("10"))) as session:
            client = session.client(config, transport=EveryByteACacheWrite())
            return await client.call(ask(1, max_tokens=64), CallTag(lane="m", case_id="w"))

    envelope = asyncio.run(run()).final
    assert envelope.cost_usd is not None and envelope.reserved_usd is not None
    assert envelope.cost_usd <= envelope.reserved_usd


# -- 5. max_total_s counts from the first attempt's send ------------------------------------


def test_time_queued_for_a_slot_does_not_eat_the_retry_budget(
    sim: SimHandle, tmp_path: Path
) -> None:
    """Four 5xx, then a reply; the call first waits 1 s for the provider's only slot."""
    policy = FAST_RETRY.model_copy(update={"max_attempts": 6, "max_total_s": 0.5})
    config = sim_config(sim, "flaky:heal-late", retry=policy)

    async def run() -> CallResult:
        async with new_session(tmp_path, provider_limits={"simulated": 1}) as session:
            client = session.client(config)
            async with session.slot(config):  # another call holds the only slot
                queued = asyncio.create_task(
                    client.call(ask(1), CallTag(lane="m", case_id="queued"))
                )
                await asyncio.sleep(1.0)
            return await queued

    result = asyncio.run(run())
    assert result.status == "ok", [e.failure_detail for e in result.envelopes]
    assert [e.status for e in result.envelopes] == ["retried"] * 4 + ["ok"]
