"""The one model interface: `await client.call(request, tag)` -> a typed result + envelopes.

A :class:`CallSession` is one run's worth of calls: it owns the envelope journal, the
response cache, the budget gate, the price book, the per-provider limits on calls in
flight and the progress bar. `session.client(config)` gives a :class:`ModelClient` for
one model config. Each call:

1. waits for a provider slot (first come, first served), and only then is prepared:
   hashes everything that changes the answer (the cache key, recorded as request hash),
   takes its call id and serializes its wire body once;
2. serves a cache hit (record/replay mode; the stored reply redacted too), or raises on
   a replay miss, without network;
3. otherwise, per attempt, holding a provider slot (a retry waits for one again): prices
   the worst case (the wire's own output limit, the dearest input kind) and reserves it
   against the budget (refusal: the call is budget-stopped, †), journals a pre-send
   record (what a crash leaves: an interrupted attempt), sends through the transport,
   redacts every known key from what came back (so nothing downstream sees one), prices
   the actual usage with the tier of the day, and — whatever happens, in `finally` —
   settles the reservation to what the attempt may have cost (see
   `settled_cost`);
4. labels the outcome, writes the attempt's envelope (redacted) to the journal as it
   lands, and retries connect errors, timeouts, 429 and 5xx with backoff that honours
   Retry-After, bounded in count and in time since the first attempt was sent — what
   still fails is an infrastructure error (‡);
5. stores a landed reply in the cache (never an infrastructure or harness error).
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import logging
import random
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from datetime import UTC, date, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any, NamedTuple, TypeVar

from eval_pipeline.cases.readers import read_answer_line
from eval_pipeline.providers.budget import BudgetGate, input_token_bound, wire_output_limit
from eval_pipeline.providers.cache import (
    CachedReply,
    CacheMode,
    ResponseCache,
    call_key_json,
    material_of,
    request_key,
    slot_of,
)
from eval_pipeline.providers.call_slots import CallSlots, RunSlots
from eval_pipeline.providers.collector import calls_in_flight
from eval_pipeline.providers.config import ModelConfig, RetryPolicy
from eval_pipeline.providers.envelope import (
    CacheStatus,
    CallEnvelope,
    EnvelopeJournal,
    envelope_json,
    envelope_texts,
)
from eval_pipeline.providers.errors import (
    BudgetStoppedError,
    PriceError,
    ProviderError,
    ReplayMissError,
)
from eval_pipeline.providers.labels import (
    STATUS_MARKS,
    AnswerReader,
    CallStatus,
    FailureCause,
    Grader,
    LabelResult,
    LabelSummary,
    classify,
    summarize,
)
from eval_pipeline.providers.prices import PriceBook, TierCost
from eval_pipeline.providers.redact import Redactor, record_texts, redact_record
from eval_pipeline.providers.transport import AttemptOutcome, Transport, WireRequest
from eval_pipeline.providers.transport_factory import make_transport
from eval_pipeline.providers.types import ModelRequest, ModelResponse
from eval_pipeline.records import FrozenRecord

log = logging.getLogger(__name__)

RETRYABLE_CAUSES = frozenset({"connect", "timeout", "429", "5xx"})
"""The infrastructure errors retried; an `oversize` reply is not (the same request would
most likely be answered the same, each time read up to the cap and billed)."""
UNKNOWN_FATE_CAUSES = frozenset({"connect", "timeout"})
"""Failures with no HTTP answer: the request may have reached the provider, which bills
what it received, so until a bill says otherwise the attempt costs its worst case."""
INTERRUPTED_DETAIL = (
    "the process ended while this attempt was in flight; the provider may have billed it "
    "(up to reserved_usd)"
)
INTERRUPTED_LABEL = classify("infra_error", None, failure_cause="interrupted")
"""The label of a pre-send record (no reply, no grader involved): a drop, cause interrupted."""
Sleep = Callable[[float], Awaitable[None]]


_Record = TypeVar("_Record", bound=FrozenRecord)
Labeller = Callable[..., LabelResult]
"""`classify` with the call's grader and answer reader bound."""


class CallTag(FrozenRecord):
    """Where a call belongs: lane, case and turn of the conversation."""

    lane: str
    case_id: str
    turn: int = 0


class CallResult(FrozenRecord):
    """A call's outcome: the reply (if any), its label and every attempt's envelope."""

    call_id: str
    status: CallStatus
    response: ModelResponse | None
    label: LabelResult
    envelopes: tuple[CallEnvelope, ...]

    @property
    def final(self) -> CallEnvelope:
        return self.envelopes[-1]

    @property
    def mark(self) -> str:
        """`‡` infrastructure error, `†` budget-stopped, `` otherwise: never a zero."""
        return STATUS_MARKS.get(self.status, "")

    @property
    def retries(self) -> int:
        return sum(1 for envelope in self.envelopes if envelope.status == "retried")


def backoff_delay_s(
    policy: RetryPolicy, attempt: int, retry_after_ms: int | None, rng: random.Random
) -> float:
    """Delay before the attempt after `attempt`: jittered exponential, at least Retry-After."""
    ceiling = min(policy.max_delay_s, policy.base_delay_s * policy.multiplier ** (attempt - 1))
    jittered = ceiling * (1 - policy.jitter * rng.random())
    asked = (retry_after_ms or 0) / 1000
    return max(jittered, asked)


def utc_today() -> date:
    return datetime.now(UTC).date()


def cache_material(config: ModelConfig, request: ModelRequest) -> dict[str, Any]:
    """Everything that changes the answer, and nothing that does not."""
    return material_of(config.provider, config.api, config.model, request)


def request_hash_of(config: ModelConfig, request: ModelRequest) -> str:
    """`key_of(cache_material(config, request))`: the cache key, recorded as request hash."""
    return request_key(config.provider, config.api, config.model, request)


def response_json(response: ModelResponse) -> str:
    """`response.model_dump_json()`, straight from the model's serializer (the method's
    keyword handling costs as much as the serializing, once per attempt)."""
    return _RESPONSE_JSON(response).decode()


_RESPONSE_JSON = ModelResponse.__pydantic_serializer__.to_json


def settled_cost(outcome: AttemptOutcome, actual: TierCost | None, worst: TierCost) -> Decimal:
    """What the budget counts as spent for one attempt, until a bill says otherwise.

    The priced usage of a landed reply; the worst case for a 200 without usable usage
    (it is billed) and for a failure without an HTTP answer (connect, timeout: it may have
    been received and billed); nothing for an HTTP error the provider answered (429,
    5xx, 4xx are not billed).
    """
    if actual is not None:
        return actual.cost_usd
    if outcome.cause is None or outcome.cause in UNKNOWN_FATE_CAUSES:
        return worst.cost_usd
    return Decimal(0)


class _AttemptDone(NamedTuple):
    """One attempt's envelope and what `call` needs besides it (a named tuple: made per
    attempt, it costs a fraction of a frozen dataclass)."""

    envelope: CallEnvelope
    label: LabelResult
    outcome: AttemptOutcome | None
    response: ModelResponse | None
    sent_at: float | None
    price_error: PriceError | None


class _Reply(NamedTuple):
    """What came back for an attempt, or from the cache, as an envelope records it."""

    http_status: int | None = None
    body: str | None = None
    response_json: str | None = None
    finish_reason: str | None = None
    stop_kind: str | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None

    @classmethod
    def of(cls, outcome: AttemptOutcome) -> _Reply:
        response = outcome.response
        if response is None:
            return cls(http_status=outcome.http_status, body=outcome.body)
        usage = response.usage
        return cls(
            http_status=outcome.http_status,
            body=outcome.body,
            response_json=response_json(response),
            finish_reason=response.finish_reason,
            stop_kind=response.stop_kind,
            input_tokens=usage.input_tokens if usage else None,
            output_tokens=usage.output_tokens if usage else None,
        )

    @classmethod
    def cached(cls, entry: CachedReply) -> _Reply:
        return cls(
            http_status=entry.http_status,
            body=entry.response_body,
            response_json=entry.response_json,
            finish_reason=entry.finish_reason,
            stop_kind=entry.stop_kind,
            input_tokens=entry.input_tokens,
            output_tokens=entry.output_tokens,
        )


NO_REPLY = _Reply()
"""An attempt the budget refused, or one journaled before it was sent."""


class _Envelopes:
    """The one builder of a call's envelopes: the call's fields are filled once, and each
    attempt (sent, refused by the budget, about to be sent, or served from the cache)
    adds its own."""

    __slots__ = ("call_fields", "call_id", "common", "run_id", "tag")

    def __init__(
        self,
        session: CallSession,
        config: ModelConfig,
        request: ModelRequest,
        tag: CallTag,
        call_id: str,
        request_hash: str,
        request_json: str,
    ) -> None:
        self.call_fields: dict[str, Any] = {
            "call_id": call_id,
            "request_hash": request_hash,
            "lane": tag.lane,
            "case_id": tag.case_id,
            "turn": tag.turn,
            "seed": request.seed,
            "replicate": request.replicate,
            "request_json": request_json,
        }
        """The fields that differ between calls of one client in one session."""
        self.common: dict[str, Any] = {
            "run_id": session.run_id,
            "model": config.name,
            "provider": config.provider,
            "api": config.api,
            "wire_model": config.model,
            "price_model": config.priced_as,
            **self.call_fields,
        }
        self.run_id = session.run_id
        self.call_id = call_id
        self.tag = tag

    def build(
        self,
        attempt: int,
        *,
        status: CallStatus,
        label: LabelResult,
        started_at: datetime,
        day: date,
        cache_status: CacheStatus,
        reserved_usd: Decimal | None,
        price_tier: str | None,
        cost_usd: Decimal | None = None,
        failure_cause: FailureCause | None = None,
        failure_detail: str | None = None,
        reply: _Reply = NO_REPLY,
        elapsed_ms: float = 0.0,
        retry_after_ms: int | None = None,
        backoff_ms: float | None = None,
    ) -> CallEnvelope:
        return CallEnvelope(
            envelope_id=f"{self.run_id}/{self.call_id}/{attempt}",
            attempt=attempt,
            final=status != "retried",
            started_at=started_at,
            call_day=day,
            elapsed_ms=elapsed_ms,
            status=status,
            http_status=reply.http_status,
            failure_cause=failure_cause,
            failure_detail=failure_detail,
            retry_after_ms=retry_after_ms,
            backoff_ms=backoff_ms,
            finish_reason=reply.finish_reason,
            stop_kind=reply.stop_kind,
            input_tokens=reply.input_tokens,
            output_tokens=reply.output_tokens,
            price_tier=price_tier,
            cost_usd=cost_usd,
            reserved_usd=reserved_usd,
            label=label.label,
            label_reason=label.reason,
            drop_cause=label.drop_cause,
            answer=label.answer,
            cache_status=cache_status,
            response_body=reply.body,
            response_json=reply.response_json,
            **self.common,
        )

    def pending(
        self,
        template: CallEnvelope | None,
        attempt: int,
        *,
        started_at: datetime,
        day: date,
        cache_status: CacheStatus,
        reserved_usd: Decimal,
        price_tier: str,
    ) -> CallEnvelope:
        """The pre-send record of an attempt: an interrupted attempt (‡), which the
        provider may have billed, until the attempt's own envelope supersedes it.

        Validated (`build`) for a client's first attempt. After that, a copy of
        `template`, an earlier pre-send record of the same client and session (so the
        same run, model, status, label and failure fields), with this call's and this
        attempt's values, not validated again: the call's come from a validated
        `CallTag` and `ModelRequest`, the hash and id are strings made here (or the id of a
        validated envelope, for a rerun), the request JSON is pydantic's; the attempt's
        start time is made here, the reservation and the tier are the price book's
        `TierCost` (a `Decimal` and a tier id). The day comes from the session's clock, so
        a day that is not a plain `date` is validated. `test_provider_envelope_copy.py`
        checks, over generated calls, that the copy equals the validated record.
        """
        if template is None or type(day) is not date:
            return self.build(
                attempt,
                status="infra_error",
                label=INTERRUPTED_LABEL,
                started_at=started_at,
                day=day,
                cache_status=cache_status,
                reserved_usd=reserved_usd,
                price_tier=price_tier,
                failure_cause="interrupted",
                failure_detail=INTERRUPTED_DETAIL,
            )
        return template.model_copy(
            update={
                "envelope_id": f"{self.run_id}/{self.call_id}/{attempt}",
                "attempt": attempt,
                "started_at": started_at,
                "call_day": day,
                "cache_status": cache_status,
                "reserved_usd": reserved_usd,
                "price_tier": price_tier,
                **self.call_fields,
            }
        )

    @staticmethod
    def landed(
        pending: CallEnvelope,
        *,
        status: CallStatus,
        label: LabelResult,
        price_tier: str | None,
        cost_usd: Decimal | None,
        failure_cause: FailureCause | None,
        failure_detail: str | None,
        reply: _Reply,
        elapsed_ms: float,
        retry_after_ms: int | None,
        backoff_ms: float | None,
    ) -> CallEnvelope:
        """A sent attempt's own envelope: its pre-send record (validated by `build`, or a
        copy equal to one: see `pending`) with what came back.

        Not validated again, because every value it changes already was or is made here
        with its field's type: the status and `final` (literals of this module), the label
        fields (a validated `LabelResult`), the tier and cost (the price book's `TierCost`:
        a tier id and an exact `Decimal`), the cause, detail, HTTP status, Retry-After
        and body (a validated `AttemptOutcome`, or the unpriced detail made here), the
        finish reason, stop kind and tokens (its validated `ModelResponse` and `Usage`),
        the response JSON (that response serialized) and the two timings (floats made
        here). Validating them again cost as much as building the record twice per
        attempt. `test_provider_envelope_copy.py` checks, over generated outcomes, that
        the copy equals the envelope `build` validates from the same values.
        """
        return pending.model_copy(
            update={
                "final": status != "retried",
                "elapsed_ms": elapsed_ms,
                "status": status,
                "http_status": reply.http_status,
                "failure_cause": failure_cause,
                "failure_detail": failure_detail,
                "retry_after_ms": retry_after_ms,
                "backoff_ms": backoff_ms,
                "finish_reason": reply.finish_reason,
                "stop_kind": reply.stop_kind,
                "input_tokens": reply.input_tokens,
                "output_tokens": reply.output_tokens,
                "price_tier": price_tier,
                "cost_usd": cost_usd,
                "label": label.label,
                "label_reason": label.reason,
                "drop_cause": label.drop_cause,
                "answer": label.answer,
                "response_body": reply.body,
                "response_json": reply.response_json,
            }
        )


class _Prepared(NamedTuple):
    """What every attempt of a call shares, made once the call holds a provider slot."""

    request_hash: str
    material: dict[str, Any] | None
    """The cache key's material, kept only when a cache is in use (to store the reply)."""
    build: _Envelopes
    wire: WireRequest
    input_bound: int
    """Input tokens the wire bytes can hold at most (`budget.input_token_bound`)."""
    output_limit: int
    """The output limit the wire body carries (`budget.wire_output_limit`)."""
    cache_status: CacheStatus


class ModelClient:
    """Calls one configured model inside a session."""

    def __init__(self, session: CallSession, config: ModelConfig, transport: Transport) -> None:
        self.session = session
        self.config = config
        self.transport = transport
        self._pending_template: CallEnvelope | None = None
        """The last pre-send record: the next one is a copy (`_Envelopes.pending`)."""

    async def call(
        self,
        request: ModelRequest,
        tag: CallTag,
        grader: Grader | None = None,
        *,
        first_attempt: int = 1,
        call_id: str | None = None,
        read_answer: AnswerReader = read_answer_line,
    ) -> CallResult:
        """Send `request` (or serve it from the cache) and record every attempt.

        The call is prepared (hashed, numbered, looked up in the cache, serialized for the
        wire) only once it holds a provider slot, and each attempt holds one while it is
        sent: with many calls gathered at once, the ones in flight are answered before
        the queued ones are prepared. Slots are handed out first come, first served, so
        call ids (which count duplicate requests in call order) stay deterministic.

        Raises ReplayMissError in replay mode when the request is not cached, and
        PriceError when the model or the day has no price (before sending), or when a
        landed reply's usage cannot be priced (after its envelope is written and its
        reservation settled at the worst case). Infrastructure errors, harness errors and
        budget stops are results (with their status), not exceptions.
        """
        session = self.session
        slot = session.slot(self.config)
        label_of = functools.partial(classify, grader=grader, read_answer=read_answer)
        prepared: _Prepared | None = None
        envelopes: list[CallEnvelope] = []
        first_sent: float | None = None
        attempt = first_attempt
        while True:
            async with slot:
                if prepared is None:
                    ready = self._prepare(request, tag, call_id, label_of)
                    if isinstance(ready, CallResult):  # served from the cache
                        return session.finish(ready)
                    prepared = ready
                done = await self._attempt(
                    request,
                    prepared,
                    attempt,
                    label_of,
                    first_sent,
                    attempt - first_attempt + 1,
                )
            if first_sent is None:
                first_sent = done.sent_at
            envelope = session.record(done.envelope)
            envelopes.append(envelope)
            if done.price_error is not None:
                raise done.price_error
            if envelope.status != "retried":
                break
            await session.sleep(float(envelope.backoff_ms or 0) / 1000)
            attempt += 1
        final = envelopes[-1]
        if (
            final.status == "ok"
            and done.outcome is not None
            and prepared.material is not None
            and session.cache is not None
            and session.cache_mode == "record"
        ):
            session.cache.store(
                CachedReply(
                    key=prepared.request_hash,
                    material=prepared.material,
                    slot=slot_of(
                        self.config.provider, self.config.model, tag.lane, tag.case_id, tag.turn
                    ),
                    http_status=final.http_status or 200,
                    response_body=final.response_body or "",
                    response_json=final.response_json or "{}",
                    finish_reason=final.finish_reason,
                    stop_kind=final.stop_kind,
                    input_tokens=final.input_tokens,
                    output_tokens=final.output_tokens,
                    price_tier=final.price_tier,
                    cost_usd=final.cost_usd,
                    reserved_usd=final.reserved_usd,
                    call_day=final.call_day,
                    attempt=final.attempt,
                )
            )
        label = done.label
        if final is not done.envelope:  # redacted on its way to the journal
            label = LabelResult(
                label=final.label,
                reason=final.label_reason or "",
                drop_cause=final.drop_cause,
                answer=final.answer,
            )
        return session.finish(
            CallResult(
                call_id=prepared.build.call_id,
                status=final.status,
                response=done.response,
                label=label,
                envelopes=tuple(envelopes),
            )
        )

    def _prepare(
        self, request: ModelRequest, tag: CallTag, call_id: str | None, label_of: Labeller
    ) -> _Prepared | CallResult:
        """What every attempt of the call shares, made once the call holds its slot: the
        request hash, the call id, the envelope builder and the wire bytes; or, on a cache
        hit, the call's result (a replay miss raises)."""
        session = self.session
        config = self.config
        request_hash = request_hash_of(config, request)
        call_id = call_id or session.next_call_id(config.name, tag, request_hash)
        build = _Envelopes(
            session, config, request, tag, call_id, request_hash, request.model_dump_json()
        )
        cache_status: CacheStatus = "off"
        material: dict[str, Any] | None = None
        if session.cache is not None and session.cache_mode != "off":
            material = cache_material(config, request)
            slot = slot_of(config.provider, config.model, tag.lane, tag.case_id, tag.turn)
            lookup = session.cache.lookup(request_hash, material, slot)
            if lookup.entry is not None:
                return self._from_cache(lookup.entry, request, build, label_of)
            if session.cache_mode == "replay":
                raise ReplayMissError(request_hash, lookup.reason)
            cache_status = "miss"
        # Built and serialized once: every attempt sends these bytes, which bound its cost.
        wire = WireRequest.of(self.transport.wire_body(request))
        return _Prepared(
            request_hash=request_hash,
            material=material,
            build=build,
            wire=wire,
            input_bound=input_token_bound(wire.data, config.input_token_overhead),
            output_limit=wire_output_limit(wire.body),
            cache_status=cache_status,
        )

    def _price_usage(
        self, outcome: AttemptOutcome, day: date
    ) -> tuple[TierCost | None, PriceError | None]:
        """The landed reply's cost, or the reason it cannot be priced (raised by `call`
        once the attempt's envelope is written and its reservation settled)."""
        response = outcome.response
        if outcome.cause is not None or response is None or response.usage is None:
            return None, None
        usage = response.usage
        try:
            quote = self.session.price_book.cost(
                self.config.priced_as,
                day,
                usage.input_tokens,
                usage.output_tokens,
                cache_read_tokens=usage.cache_read_tokens,
                cache_write_tokens=usage.cache_write_tokens,
            )
        except PriceError as error:
            return None, error
        return quote, None

    async def _attempt(
        self,
        request: ModelRequest,
        prepared: _Prepared,
        attempt: int,
        label_of: Labeller,
        first_sent: float | None,
        tries: int,
    ) -> _AttemptDone:
        """One attempt; the caller holds the call's provider slot around it."""
        session = self.session
        config = self.config
        build = prepared.build
        wire = prepared.wire
        day = session.clock()
        started_at = datetime.now(UTC).replace(tzinfo=None)
        worst = session.price_book.worst_case_cost(
            config.priced_as, day, prepared.input_bound, prepared.output_limit
        )
        reservation = None
        if session.budget is not None:
            where = f"{build.tag.lane}/{build.tag.case_id}/turn {build.tag.turn}"
            try:
                reservation = await session.budget.acquire(worst.cost_usd, where)
            except BudgetStoppedError as stop:
                label = label_of("budget_stopped", None, request.tools)
                refused = build.build(
                    attempt,
                    status="budget_stopped",
                    label=label,
                    started_at=started_at,
                    day=day,
                    cache_status=prepared.cache_status,
                    reserved_usd=worst.cost_usd,
                    price_tier=worst.tier_id,
                    failure_cause="budget",
                    failure_detail=str(stop),
                )
                return _AttemptDone(
                    envelope=refused,
                    label=label,
                    outcome=None,
                    response=None,
                    sent_at=None,
                    price_error=None,
                )
        # Until the outcome says otherwise, the attempt may have cost its worst case.
        spent_usd = worst.cost_usd
        # What the journal keeps if the process dies before the attempt lands: an
        # interrupted attempt (‡), which the provider may have billed. The attempt's own
        # envelope (a copy of this one with what came back) supersedes it.
        pending = build.pending(
            self._pending_template,
            attempt,
            started_at=started_at,
            day=day,
            cache_status=prepared.cache_status,
            reserved_usd=worst.cost_usd,
            price_tier=worst.tier_id,
        )
        self._pending_template = pending
        try:
            session.record_pending(pending)
            session.crash_point("harness.sending")
            sent_at = time.monotonic()
            clock_start = time.perf_counter()
            # Redacted where it enters the process: the envelope, the result's response,
            # and so the lanes, the judge, tracking and the reports only see it redacted.
            outcome = session.redacted_outcome(await self.transport.send(wire, request))
            elapsed_ms = (time.perf_counter() - clock_start) * 1000
            actual, price_error = self._price_usage(outcome, day)
            spent_usd = settled_cost(outcome, actual, worst)
        finally:
            if reservation is not None and session.budget is not None:
                session.budget.settle(reservation, spent_usd)

        response = outcome.response
        status: CallStatus
        backoff_ms: float | None = None
        if outcome.cause is None:
            status = "ok"
        elif outcome.cause == "harness_4xx":
            status = "harness_error"
        else:
            status = "infra_error"
            delay = backoff_delay_s(config.retry, tries, outcome.retry_after_ms, session.rng)
            spent_s = time.monotonic() - (sent_at if first_sent is None else first_sent)
            if (
                outcome.cause in RETRYABLE_CAUSES
                and tries < config.retry.max_attempts
                and spent_s + delay <= config.retry.max_total_s
            ):
                status = "retried"
                backoff_ms = delay * 1000
        if status == "retried":
            label = LabelResult(label=None, reason=f"retried after {outcome.cause}")
        else:
            label = label_of(status, response, request.tools, failure_cause=outcome.cause)
        detail = outcome.detail
        if price_error is not None:
            detail = f"landed but unpriced (worst case kept as spent): {price_error}"
        envelope = build.landed(
            pending,
            status=status,
            label=label,
            price_tier=actual.tier_id if actual else None,
            cost_usd=actual.cost_usd if actual else None,
            failure_cause=outcome.cause,
            failure_detail=detail,
            reply=_Reply.of(outcome),
            elapsed_ms=elapsed_ms,
            retry_after_ms=outcome.retry_after_ms,
            backoff_ms=backoff_ms,
        )
        return _AttemptDone(
            envelope=envelope,
            label=label,
            outcome=outcome,
            response=response,
            sent_at=sent_at,
            price_error=price_error,
        )

    def _from_cache(
        self,
        entry: CachedReply,
        request: ModelRequest,
        build: _Envelopes,
        label_of: Labeller,
    ) -> CallResult:
        # A stored reply is text from outside too (recorded under other keys, or before
        # replies were redacted where they arrive). Its JSON redacted in every spelling
        # (JSON escapes included) parses to texts that hold none.
        entry = self.session.redacted(entry)
        response = ModelResponse.model_validate_json(entry.response_json)
        label = label_of("ok", response, request.tools)
        envelope = build.build(
            entry.attempt,
            status="ok",
            label=label,
            started_at=datetime.now(UTC).replace(tzinfo=None),
            day=entry.call_day,
            cache_status="hit",
            reserved_usd=entry.reserved_usd,
            price_tier=entry.price_tier,
            cost_usd=entry.cost_usd,
            reply=_Reply.cached(entry),
        )
        return CallResult(
            call_id=build.call_id,
            status="ok",
            response=response,
            label=label,
            envelopes=(self.session.record(envelope),),
        )


class CallSession:
    """One run of model calls: journal, cache, budget, prices, limits, progress.

    Use as `async with CallSession(...) as session:`; on exit the SDK clients and the
    journal are closed. Where the journal goes and whether it is loaded into a warehouse
    are the caller's (`warehouse.envelopes.load_journal`), as is showing progress
    (`on_call_finished`, called once per finished call).
    """

    def __init__(
        self,
        *,
        run_id: str,
        journal_path: Path,
        price_book: PriceBook,
        budget: BudgetGate | None = None,
        cache: ResponseCache | None = None,
        cache_mode: CacheMode = "off",
        clock: Callable[[], date] = utc_today,
        base_urls: Mapping[str, str] | None = None,
        api_keys: Mapping[str, str] | None = None,
        secrets: Iterable[str] = (),
        provider_limits: Mapping[str, int] | None = None,
        slots: RunSlots | None = None,
        rng: random.Random | None = None,
        sleep: Sleep = asyncio.sleep,
        on_call_finished: Callable[[CallResult], None] | None = None,
        crash_point: Callable[[str], None] = lambda _point: None,
        fsync: bool = False,
    ) -> None:
        if cache_mode != "off" and cache is None:
            raise ProviderError(f"cache mode {cache_mode!r} needs a ResponseCache")
        self.run_id = run_id
        self.journal = EnvelopeJournal(journal_path, fsync=fsync)
        self.price_book = price_book
        self.budget = budget
        self.cache = cache
        self.cache_mode: CacheMode = cache_mode
        self.clock = clock
        self.base_urls = dict(base_urls or {})
        self.api_keys = dict(api_keys or {})
        self.rng = rng or random.Random()
        self.sleep = sleep
        self.on_call_finished = on_call_finished
        self.crash_point = crash_point
        """Called with a point's name where a crash test may kill the process
        (`eval_pipeline.crashpoints`, passed in by the sessions the pipeline opens)."""
        self.redact = Redactor([*self.api_keys.values(), *secrets])
        """Every key this session knows of, from its start: a reply from one client may
        echo another's key (`secrets`: every configured key, see `sessions.session_for`)."""
        self.envelopes: list[CallEnvelope] = []
        self._clients: dict[str, ModelClient] = {}
        self._configs: dict[str, ModelConfig] = {}
        self._own_slots = slots is None
        self._slots = RunSlots(provider_limits=provider_limits) if slots is None else slots
        """Per provider, the calls this run may have in flight; `slots` (the caller's, who
        closes them) shares them with other sessions of the run in the same event loop."""
        self._call_counts: dict[str, int] = {}

    async def __aenter__(self) -> CallSession:
        calls_in_flight.enter()
        return self

    async def __aexit__(self, *_exc: object) -> None:
        try:
            await self.aclose()
        finally:
            calls_in_flight.exit()

    def client(
        self,
        config: ModelConfig,
        base_url: str | None = None,
        *,
        transport: Transport | None = None,
    ) -> ModelClient:
        """The client for `config` (one per config name and session).

        `transport` replaces the SDK transport (a test double); the key is still read.
        """
        existing = self._clients.get(config.name)
        if existing is not None:
            return existing
        # A key handed to the session (the simulated provider's, which is not a secret)
        # wins; otherwise it comes from the environment variable the config names.
        api_key = self.api_keys.get(config.name) or config.resolve_api_key()
        self.redact.add(api_key)
        if transport is None:
            url = config.resolve_base_url(base_url or self.base_urls.get(config.name))
            transport = make_transport(config, api_key, url)
        client = ModelClient(self, config, transport)
        self._clients[config.name] = client
        self._configs[config.name] = config
        return client

    def slot(self, config: ModelConfig) -> CallSlots:
        """The calls in flight this run may have for the provider (`call_slots.RunSlots`)."""
        return self._slots.for_config(config)

    def next_call_id(self, model: str, tag: CallTag, request_hash: str) -> str:
        """Deterministic across runs: the same calls in a replay get the same ids."""
        material = call_key_json([model, tag.lane, tag.case_id, tag.turn, request_hash])
        base = hashlib.sha256(material.encode("utf-8")).hexdigest()[:20]
        count = self._call_counts.get(base, 0)
        self._call_counts[base] = count + 1
        return base if count == 0 else f"{base}.{count}"

    def redacted(self, record: _Record) -> _Record:
        """`record` (an attempt's outcome, a reply read from the cache) with every known
        secret removed from every text in it: body, error detail, the reply's text, tool
        calls, ids, stop reason.

        One search over those texts joined by NUL (which no key holds: an environment
        variable cannot), so a record without a key (the hot path) is returned as is.
        """
        if self.redact.finds("\0".join(record_texts(record))):
            return redact_record(self.redact, record)
        return record

    def redacted_outcome(self, outcome: AttemptOutcome) -> AttemptOutcome:
        """`redacted(outcome)`, its texts gathered by hand: once per attempt, where
        iterating the records' fields cost ten times the search."""
        texts = [outcome.body or "", outcome.detail or ""]
        response = outcome.response
        if response is not None:
            texts += (
                response.text or "",
                response.finish_reason or "",
                response.response_id or "",
                response.reported_model or "",
            )
            for call in response.tool_calls:
                texts += (call.id, call.name, call.arguments)
        if self.redact.finds("\0".join(texts)):
            return redact_record(self.redact, outcome)
        return outcome

    def redact_envelope(self, envelope: CallEnvelope) -> CallEnvelope:
        """The envelope with every known secret removed from every text field."""
        changed: dict[str, str] = {}
        for name, value in envelope:
            if isinstance(value, str):
                clean = self.redact(value)
                if clean != value:
                    changed[name] = clean
        return envelope.model_copy(update=changed) if changed else envelope

    def _journal(self, envelope: CallEnvelope) -> CallEnvelope:
        """Write the envelope's line, redacted; returns the envelope as written.

        Its text fields are searched for every secret (raw or in any JSON spelling) in one
        pass over them joined by NUL, which no key holds (an environment variable cannot),
        so no match spans two fields; only an envelope that holds a key is copied with its
        fields redacted.
        """
        if self.redact.finds("\0".join(filter(None, envelope_texts(envelope)))):
            envelope = self.redact_envelope(envelope)
        self.journal.append_json(envelope_json(envelope))
        return envelope

    def record(self, envelope: CallEnvelope) -> CallEnvelope:
        """Append an envelope (redacted) to the journal, flushed as soon as its attempt
        lands; returns the envelope as recorded."""
        envelope = self._journal(envelope)
        self.envelopes.append(envelope)
        self.crash_point("harness.landed")
        return envelope

    def record_pending(self, envelope: CallEnvelope) -> None:
        """Journal an attempt about to be sent (an interrupted attempt until its own
        envelope supersedes it; see `ModelClient._attempt`)."""
        self._journal(envelope)

    def finish(self, result: CallResult) -> CallResult:
        if self.on_call_finished is not None:
            self.on_call_finished(result)
        return result

    def summary(self) -> LabelSummary:
        """Labels, yield and accuracy-on-yield over every envelope recorded so far."""
        return summarize(self.envelopes)

    async def rerun(
        self,
        envelope: CallEnvelope,
        grader: Grader | None = None,
        read_answer: AnswerReader = read_answer_line,
    ) -> CallResult:
        """Re-send a stored call (an infrastructure error, to heal it) under the same call id."""
        client = self._clients.get(envelope.model)
        if client is None:
            raise ProviderError(
                f"rerun of {envelope.call_id}: open a client for model {envelope.model} first"
            )
        return await client.call(
            envelope.request(),
            CallTag(lane=envelope.lane, case_id=envelope.case_id, turn=envelope.turn),
            grader,
            first_attempt=envelope.attempt + 1,
            call_id=envelope.call_id,
            read_answer=read_answer,
        )

    async def aclose(self) -> None:
        """Close SDK clients and the journal."""
        for client in self._clients.values():
            await client.transport.close()
        self._clients.clear()
        if self._own_slots:
            self._slots.close()
        self.journal.close()
        self.crash_point("harness.before_load")  # every call landed; the caller loads next


async def gather_calls(
    calls: Sequence[Awaitable[CallResult]],
) -> list[CallResult]:
    """Run calls concurrently (the provider limits bound what is in flight)."""
    return list(await asyncio.gather(*calls))
