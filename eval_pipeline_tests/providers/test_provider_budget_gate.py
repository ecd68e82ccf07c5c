"""The budget gate and its worst-case bound, unit by unit (no sim).

Each test closes a gap that mutation testing found (issue 13): the bound counted in
characters instead of UTF-8 bytes, a non-zero `input_token_overhead`, a reservation that
lands exactly on the cap, the refusal message, and a waiter that is never woken. Every
wait here has a timeout, so a gate that forgets to wake a waiter fails instead of hanging.
"""

from __future__ import annotations

import asyncio
import json
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from eval_pipeline.providers.budget import (
    BudgetGate,
    Reservation,
    wire_output_limit,
    worst_case_input_tokens,
)
from eval_pipeline.providers.errors import BudgetError, BudgetStoppedError
from eval_pipeline.providers.types import OUTPUT_LIMIT_KEYS

WAIT_S = 2.0
"""Long enough for any wake-up on a loaded machine; a waiter never woken fails after it."""


def body(text: str) -> dict[str, Any]:
    return {"model": "m", "messages": [{"role": "user", "content": text}], "max_tokens": 16}


@pytest.mark.parametrize(
    ("text", "extra_bytes"),
    [("é", 1), ("版税", 4), ("😀", 3), ("naïve café", 2)],
)
def test_the_bound_counts_utf8_bytes_not_characters(text: str, extra_bytes: int) -> None:
    """CJK and emoji prompts take several bytes a character: each byte may be a token."""
    ascii_twin = "x" * len(text)
    assert worst_case_input_tokens(body(text)) == worst_case_input_tokens(body(ascii_twin)) + (
        extra_bytes
    )


@given(st.text(max_size=60), st.integers(min_value=0, max_value=10_000))
def test_the_bound_is_the_compact_json_byte_length_plus_the_overhead(
    text: str, overhead: int
) -> None:
    wire = body(text)
    compact = json.dumps(wire, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    assert worst_case_input_tokens(wire, overhead) == len(compact) + overhead
    assert worst_case_input_tokens(wire, overhead) - worst_case_input_tokens(wire) == overhead


def test_a_reservation_exactly_at_the_cap_is_allowed_and_a_cent_over_is_not() -> None:
    gate = BudgetGate(Decimal("1.00"))
    gate.reserve(Decimal("0.40"))
    last = gate.reserve(Decimal("0.60"))  # reserved + amount == cap: fits
    assert gate.state().reserved_usd == Decimal("1.00")
    with pytest.raises(BudgetStoppedError):
        gate.reserve(Decimal("0.01"))
    gate.settle(last, Decimal("0.60"))
    with pytest.raises(BudgetStoppedError):
        gate.reserve(Decimal("0.01"))  # 0.40 reserved + 0.60 landed: the cap is full


def test_acquire_exactly_at_the_cap_takes_at_once() -> None:
    async def scenario() -> Decimal:
        gate = BudgetGate(Decimal("1.00"))
        first = await gate.acquire(Decimal("0.25"))
        gate.settle(first, Decimal("0.25"))
        await asyncio.wait_for(gate.acquire(Decimal("0.30")), WAIT_S)
        # landed 0.25 + reserved 0.30 + 0.45 == cap: neither refused nor left waiting
        await asyncio.wait_for(gate.acquire(Decimal("0.45")), WAIT_S)
        return gate.state().reserved_usd

    assert asyncio.run(scenario()) == Decimal("0.75")


def test_acquire_when_landed_plus_amount_is_exactly_the_cap_waits_instead_of_stopping() -> None:
    async def scenario() -> Reservation:
        gate = BudgetGate(Decimal("1.00"))
        first = await gate.acquire(Decimal("0.50"))
        gate.settle(first, Decimal("0.50"))
        in_flight = await gate.acquire(Decimal("0.20"))
        waiter = asyncio.create_task(gate.acquire(Decimal("0.50")))  # 0.50 + 0.50 == cap
        await asyncio.sleep(0)
        assert not waiter.done()
        gate.settle(in_flight, Decimal(0))
        return await asyncio.wait_for(waiter, WAIT_S)

    assert asyncio.run(scenario()).amount_usd == Decimal("0.50")


def test_the_refusal_names_the_call_and_every_amount() -> None:
    gate = BudgetGate(Decimal("0.70"))
    landed = gate.reserve(Decimal("0.10"))
    gate.settle(landed, Decimal("0.10"))
    gate.reserve(Decimal("0.20"))
    with pytest.raises(BudgetStoppedError) as refused:
        gate.reserve(Decimal("0.50"), what="case c7")
    assert str(refused.value) == (
        "budget stop for case c7: worst case $0.50 on top of $0.10 landed and $0.20 reserved "
        "would cross the cap of $0.70"
    )


def test_a_refusal_without_a_name_is_for_a_call() -> None:
    async def scenario() -> list[str]:
        gate = BudgetGate(Decimal("0.1"))
        messages = []
        with pytest.raises(BudgetStoppedError) as refused:
            gate.reserve(Decimal("0.2"))
        messages.append(str(refused.value))
        with pytest.raises(BudgetStoppedError) as refused:
            await asyncio.wait_for(gate.acquire(Decimal("0.2")), WAIT_S)
        messages.append(str(refused.value))
        return messages

    assert [m.split(":")[0] for m in asyncio.run(scenario())] == ["budget stop for call"] * 2


def test_acquire_refuses_at_once_with_the_same_message_when_nothing_in_flight_could_help() -> None:
    async def scenario() -> str:
        gate = BudgetGate(Decimal("1.0"))
        landed = await gate.acquire(Decimal("0.9"))
        gate.settle(landed, Decimal("0.9"))
        try:
            await asyncio.wait_for(gate.acquire(Decimal("0.2"), what="case c9"), WAIT_S)
        except BudgetStoppedError as refused:
            return str(refused)
        raise AssertionError("0.9 landed + 0.2 can never fit a cap of 1.0")

    assert asyncio.run(scenario()) == (
        "budget stop for case c9: worst case $0.2 on top of $0.9 landed and $0.0 reserved "
        "would cross the cap of $1.0"
    )


def test_a_waiter_is_woken_by_every_settle_until_it_fits_and_never_hangs() -> None:
    """Two calls in flight fill the cap; a third waits. The first settle frees too little,
    so the waiter must wait again and be woken by the second; then a waiter whose amount
    can no longer fit at all is woken and refused, not left waiting."""

    async def scenario() -> list[str]:
        gate = BudgetGate(Decimal("1.0"))
        a = await gate.acquire(Decimal("0.5"))
        b = await gate.acquire(Decimal("0.5"))
        events: list[str] = []
        waiter = asyncio.create_task(gate.acquire(Decimal("0.6")))
        await asyncio.sleep(0)
        gate.settle(a, Decimal("0.3"))  # 0.3 landed + 0.5 reserved + 0.6 > 1.0: still waits
        await asyncio.sleep(0.01)
        events.append("waiting" if not waiter.done() else "taken too early")
        gate.settle(b, Decimal("0.1"))  # 0.4 landed + 0.6 == 1.0: fits
        third = await asyncio.wait_for(waiter, WAIT_S)
        events.append(f"took {third.amount_usd}")
        hopeless = asyncio.create_task(gate.acquire(Decimal("0.2")))
        await asyncio.sleep(0)
        events.append("waiting" if not hopeless.done() else "decided too early")
        gate.settle(third, Decimal("0.6"))  # 1.0 landed: 0.2 can never fit
        with pytest.raises(BudgetStoppedError):
            await asyncio.wait_for(hopeless, WAIT_S)
        events.append("refused")
        state = gate.state()
        events.append(f"{state.landed_usd} landed, {state.in_flight} in flight")
        return events

    assert asyncio.run(scenario()) == [
        "waiting",
        "took 0.6",
        "waiting",
        "refused",
        "1.0 landed, 0 in flight",
    ]


def test_several_waiters_are_all_woken_by_one_settle() -> None:
    async def scenario() -> int:
        gate = BudgetGate(Decimal("1.0"))
        big = await gate.acquire(Decimal("1.0"))
        waiters = [asyncio.create_task(gate.acquire(Decimal("0.25"))) for _ in range(3)]
        await asyncio.sleep(0)
        assert not any(w.done() for w in waiters)
        gate.settle(big, Decimal(0))
        taken = await asyncio.wait_for(asyncio.gather(*waiters), WAIT_S)
        return len(taken)

    assert asyncio.run(scenario()) == 3


def test_a_negative_cap_is_refused() -> None:
    with pytest.raises(ValueError, match=r"^a budget cap cannot be negative$"):
        BudgetGate(Decimal("-0.01"))
    assert BudgetGate(Decimal(0)).state().cap_usd == 0


def test_the_output_limit_is_the_largest_limit_field_the_wire_body_carries() -> None:
    assert wire_output_limit({"max_tokens": 16}) == 16
    assert wire_output_limit({"max_tokens": 16, "max_completion_tokens": 4096}) == 4096
    assert wire_output_limit({"max_output_tokens": 7, "temperature": 900}) == 7


@pytest.mark.parametrize(
    "wire",
    [
        {"temperature": 0},  # no limit at all
        {"max_tokens": True},  # a bool is an int to Python, not a limit
        {"max_tokens": 16.0},
        {"max_tokens": 16, "max_completion_tokens": "4096"},
    ],
)
def test_a_wire_body_without_an_integer_output_limit_cannot_be_bounded(
    wire: dict[str, Any],
) -> None:
    with pytest.raises(BudgetError) as refused:
        wire_output_limit(wire)
    assert str(refused.value) == (
        f"the wire body has no integer output limit ({', '.join(OUTPUT_LIMIT_KEYS)}): "
        "its worst case cannot be bounded"
    )
    assert ", ".join(OUTPUT_LIMIT_KEYS).startswith("max_tokens, max_completion_tokens, ")
