"""The harness's lean paths give the records its validated paths give.

- A sent attempt's envelope is a copy of its pre-send record updated with what came back
  (`_Envelopes.landed`, not validated again): over generated outcomes it equals, field by
  field and as its journal line, the envelope `_Envelopes.build` validates from the same
  values. Likewise a pre-send record copied from an earlier one of the same client
  (`_Envelopes.pending`) over generated calls and attempts.
- A call is prepared (hashed, numbered, serialized) only once it holds a provider slot,
  so with more calls gathered than slots, no more calls are prepared than may be in
  flight; duplicate requests still get their ids in call order.
- The pre-send record of an attempt is in the journal, flushed, before the request is sent.
"""

from __future__ import annotations

import asyncio
from datetime import date, datetime
from decimal import Decimal
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

from hypothesis import given, settings
from hypothesis import strategies as st

from eval_pipeline.providers.config import ModelConfig
from eval_pipeline.providers.envelope import CallEnvelope, read_journal
from eval_pipeline.providers.harness import (
    INTERRUPTED_DETAIL,
    INTERRUPTED_LABEL,
    CallSession,
    CallTag,
    _Envelopes,
    _Reply,
)
from eval_pipeline.providers.labels import DROP_CAUSES, LABELS, LabelResult
from eval_pipeline.providers.transport import AttemptOutcome, WireRequest, landed
from eval_pipeline.providers.types import Message, ModelRequest, ModelResponse, ToolCall, Usage
from eval_pipeline.providers.wire import parse_openai_body, wire_body
from eval_pipeline_tests.providers.conftest import KEY_ENV, new_session

CONFIG = ModelConfig(
    name="copy-check",
    api="openai_compatible",
    provider="simulated",
    model="tool-responder",
    base_url="http://127.0.0.1:9/v1",
    api_key_env=KEY_ENV,
)
REQUEST = ModelRequest(messages=(Message(role="user", content="say x"),), max_tokens=8, seed=3)
STARTED = datetime(2026, 12, 1, 10, 0, 0, 123456)
DAY = date(2026, 12, 1)
FIRST_ATTEMPT: dict[str, Any] = {
    "started_at": STARTED,
    "day": DAY,
    "cache_status": "off",
    "reserved_usd": Decimal("0.5"),
    "price_tier": "tier-a",
}
"""A client's first pre-send record's attempt values (validated: the later ones copy it)."""

texts = st.text(max_size=40)
maybe_texts = st.none() | texts
counts = st.integers(min_value=0, max_value=10**9)
usages = st.builds(
    Usage,
    input_tokens=counts,
    output_tokens=counts,
    cache_read_tokens=counts,
    cache_write_tokens=counts,
)
responses = st.builds(
    ModelResponse,
    text=maybe_texts,
    tool_calls=st.lists(st.builds(ToolCall, id=texts, name=texts, arguments=texts), max_size=2).map(
        tuple
    ),
    stop_kind=st.none() | st.sampled_from(["end", "tool_use", "max_tokens", "other"]),
    finish_reason=maybe_texts,
    usage=st.none() | usages,
    response_id=maybe_texts,
    reported_model=maybe_texts,
    body_problem=st.none() | st.sampled_from(["empty_body", "malformed_json", "empty_reply"]),
)
causes = st.none() | st.sampled_from(
    ["connect", "timeout", "429", "5xx", "oversize", "interrupted", "harness_4xx", "budget"]
)
outcomes = st.builds(
    AttemptOutcome,
    http_status=st.none() | st.integers(min_value=100, max_value=599),
    body=maybe_texts,
    cause=causes,
    detail=maybe_texts,
    retry_after_ms=st.none() | st.integers(min_value=0, max_value=10**7),
    response=st.none() | responses,
)
labels = st.builds(
    LabelResult,
    label=st.none() | st.sampled_from(LABELS),
    reason=texts,
    drop_cause=st.none() | st.sampled_from(DROP_CAUSES),
    answer=maybe_texts,
)
money = st.decimals(min_value=0, max_value=10**6, places=12, allow_nan=False)
millis = st.floats(min_value=0, max_value=10**7, allow_nan=False, allow_infinity=False)


def builder() -> _Envelopes:
    session = cast(CallSession, SimpleNamespace(run_id="copy-check"))  # only its run id is read
    return _Envelopes(session, CONFIG, REQUEST, CallTag(lane="m", case_id="c"), "cid", "hash", "{}")


@settings(max_examples=300, deadline=None)
@given(
    status=st.sampled_from(["ok", "retried", "infra_error", "harness_error"]),
    label=labels,
    outcome=outcomes,
    priced=st.none() | st.tuples(texts, money),
    reserved=money,
    detail=maybe_texts,
    elapsed_ms=millis,
    backoff_ms=st.none() | millis,
    attempt=st.integers(min_value=1, max_value=9),
    cache_status=st.sampled_from(["off", "miss"]),
)
def test_a_landed_envelope_copied_from_its_pending_one_equals_the_validated_one(
    status: Any,
    label: LabelResult,
    outcome: AttemptOutcome,
    priced: tuple[str, Decimal] | None,
    reserved: Decimal,
    detail: str | None,
    elapsed_ms: float,
    backoff_ms: float | None,
    attempt: int,
    cache_status: Any,
) -> None:
    build = builder()
    shared: dict[str, Any] = {
        "started_at": STARTED,
        "day": DAY,
        "cache_status": cache_status,
        "reserved_usd": reserved,
    }
    pending = build.build(
        attempt,
        status="infra_error",
        label=INTERRUPTED_LABEL,
        price_tier="tier-worst",
        failure_cause="interrupted",
        failure_detail=INTERRUPTED_DETAIL,
        **shared,
    )
    came_back: dict[str, Any] = {
        "status": status,
        "label": label,
        "price_tier": priced[0] if priced else None,
        "cost_usd": priced[1] if priced else None,
        "failure_cause": outcome.cause,
        "failure_detail": detail,
        "reply": _Reply.of(outcome),
        "elapsed_ms": elapsed_ms,
        "retry_after_ms": outcome.retry_after_ms,
        "backoff_ms": backoff_ms,
    }
    copied = _Envelopes.landed(pending, **came_back)
    validated = build.build(attempt, **shared, **came_back)
    assert copied == validated
    assert copied.model_dump() == validated.model_dump()
    assert copied.model_dump_json() == validated.model_dump_json()
    assert CallEnvelope.model_validate_json(copied.model_dump_json()) == validated


def builder_for(request: ModelRequest, tag: CallTag, call_id: str, request_hash: str) -> _Envelopes:
    session = cast(CallSession, SimpleNamespace(run_id="copy-check"))
    return _Envelopes(
        session, CONFIG, request, tag, call_id, request_hash, request.model_dump_json()
    )


@settings(max_examples=300, deadline=None)
@given(
    content=texts,
    seed=st.none() | st.integers(min_value=-(2**40), max_value=2**40),
    replicate=st.integers(min_value=0, max_value=99),
    tag=st.builds(CallTag, lane=texts, case_id=texts, turn=st.integers(0, 50)),
    call_id=texts,
    request_hash=texts,
    attempt=st.integers(min_value=1, max_value=9),
    started_at=st.datetimes(),
    day=st.dates(),
    reserved=money,
    tier=texts,
    cache_status=st.sampled_from(["off", "miss"]),
)
def test_a_pending_envelope_copied_from_an_earlier_one_equals_the_validated_one(
    content: str,
    seed: int | None,
    replicate: int,
    tag: CallTag,
    call_id: str,
    request_hash: str,
    attempt: int,
    started_at: datetime,
    day: date,
    reserved: Decimal,
    tier: str,
    cache_status: Any,
) -> None:
    first = builder().pending(None, 1, **FIRST_ATTEMPT)
    request = ModelRequest(
        messages=(Message(role="user", content=content),),
        max_tokens=8,
        seed=seed,
        replicate=replicate,
    )
    build = builder_for(request, tag, call_id, request_hash)
    attempt_values: dict[str, Any] = {
        "started_at": started_at,
        "day": day,
        "cache_status": cache_status,
        "reserved_usd": reserved,
        "price_tier": tier,
    }
    copied = build.pending(first, attempt, **attempt_values)
    validated = build.pending(None, attempt, **attempt_values)
    assert copied is not validated
    assert copied == validated
    assert copied.model_dump_json() == validated.model_dump_json()
    assert CallEnvelope.model_validate_json(copied.model_dump_json()) == validated


def test_a_clock_giving_a_datetime_gets_the_validated_pending_envelope() -> None:
    """A session's clock is the caller's: a day that is not a plain date is validated (a
    midnight datetime becomes its date, as `build` makes it), never copied as is."""
    build = builder()
    first = build.pending(None, 1, **FIRST_ATTEMPT)
    midnight = datetime(2026, 12, 2)
    second = build.pending(first, 2, **{**FIRST_ATTEMPT, "day": midnight})
    assert type(second.call_day) is date
    assert second.call_day == date(2026, 12, 2)


class Recording:
    """Answers every call after a few loop turns; records when calls are prepared (their
    wire body built), sent and landed, and what the journal held at each send."""

    def __init__(self, journal: Path) -> None:
        self.journal = journal
        self.events: list[tuple[str, int]] = []
        self.pending_at_send: list[bool] = []

    def wire_body(self, request: ModelRequest) -> dict[str, Any]:
        self.events.append(("prepare", request.replicate))
        return wire_body(CONFIG, request)

    async def send(self, wire: WireRequest, request: ModelRequest) -> AttemptOutcome:
        self.events.append(("send", request.replicate))
        written = {envelope.envelope_id: envelope for envelope in read_journal(self.journal)}
        self.pending_at_send.append(
            any(
                envelope.failure_cause == "interrupted"
                and envelope.request_json == request.model_dump_json()
                for envelope in written.values()
            )
        )
        for _ in range(3):
            await asyncio.sleep(0)
        self.events.append(("land", request.replicate))
        body = (
            '{"choices":[{"message":{"content":"ANSWER: x"},"finish_reason":"stop"}],'
            '"usage":{"prompt_tokens":3,"completion_tokens":2}}'
        )
        return landed(200, body, parse_openai_body(body))

    async def close(self) -> None:
        return None


def journal_of(tmp_path: Path) -> Path:
    """Where `new_session` journals."""
    return tmp_path / "runs" / "run-1" / "envelopes.jsonl"


def run_gathered(tmp_path: Path, requests: list[ModelRequest], limit: int) -> tuple[Any, ...]:
    transport = Recording(journal_of(tmp_path))

    async def run() -> list[Any]:
        async with new_session(tmp_path, provider_limits={"simulated": limit}) as session:
            client = session.client(CONFIG, transport=transport)
            return list(
                await asyncio.gather(
                    *(client.call(request, CallTag(lane="m", case_id="c")) for request in requests)
                )
            )

    return asyncio.run(run()), transport


def test_calls_are_prepared_only_once_they_hold_a_slot(tmp_path: Path) -> None:
    requests = [REQUEST.model_copy(update={"replicate": n}) for n in range(8)]
    results, transport = run_gathered(tmp_path, requests, limit=2)
    assert [result.status for result in results] == ["ok"] * 8
    prepared_not_landed = 0
    peak = 0
    for event, _n in transport.events:
        if event == "prepare":
            prepared_not_landed += 1
        elif event == "land":
            prepared_not_landed -= 1
        peak = max(peak, prepared_not_landed)
    assert peak == 2
    # First come, first served: calls are prepared in the order they were made.
    assert [n for event, n in transport.events if event == "prepare"] == list(range(8))


def test_duplicate_requests_are_numbered_in_call_order_while_queued(tmp_path: Path) -> None:
    results, _transport = run_gathered(tmp_path, [REQUEST] * 4, limit=1)
    base = results[0].call_id
    assert [result.call_id for result in results] == [base, f"{base}.1", f"{base}.2", f"{base}.3"]


def test_the_pending_record_is_journaled_before_each_send(tmp_path: Path) -> None:
    requests = [REQUEST.model_copy(update={"replicate": n}) for n in range(5)]
    results, transport = run_gathered(tmp_path, requests, limit=3)
    assert transport.pending_at_send == [True] * 5
    written = list(read_journal(journal_of(tmp_path)))
    assert [envelope.status for envelope in written] == ["ok"] * 5
    assert {envelope.envelope_id for envelope in written} == {
        result.final.envelope_id for result in results
    }
