"""Sending one attempt and reading what came back, raw: the transports' common contract.

A call's wire body is built and serialized once (:class:`WireRequest`); every attempt
sends those bytes, and their length is what the budget bounded. Two transports send them:

- `openai_compatible` configs (vLLM, Ollama, llama.cpp, the simulated provider's OpenAI
  wire) go through :mod:`~eval_pipeline.providers.aiohttp_transport`, plain aiohttp;
- `openai_chat` (OpenAI) and `anthropic_messages` (Anthropic) go through the official SDKs
  (:mod:`~eval_pipeline.providers.sdk_transport`), with `max_retries=0`.

Neither retries: the harness does, so that every attempt is recorded. The raw response is
read and parsed by :mod:`eval_pipeline.providers.wire`, so an empty or malformed 200 body
becomes a labelled reply rather than an exception. Failures are sorted into causes:
connect, timeout, 429, 5xx (retryable, the path's fault), oversize (a 2xx reply larger
than `max_reply_bytes`: the path's fault, not retried) and harness_4xx (our own request
refused, a 3xx included: not retried, not a path drop).

Both transports bound an attempt the same way, with the helpers here: a total deadline
(`within_deadline`, `timeout_s` around connecting, sending and reading the whole reply,
since a read timeout restarts at every byte and a server dripping one byte a second never
trips it), a size cap counted while the body is read (`ReplyTooLargeError`, `oversized`: the
body is never read whole first), and no redirect followed.
"""

from __future__ import annotations

import asyncio
import email.utils
import json
from collections.abc import Awaitable, Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol

from eval_pipeline.providers.labels import FailureCause
from eval_pipeline.providers.types import ModelRequest, ModelResponse
from eval_pipeline.providers.wire import encode_wire_body
from eval_pipeline.records import FrozenRecord


@dataclass(frozen=True)
class WireRequest:
    """One call's wire body, built and serialized once: every attempt sends `data`, and
    `len(data)` bounds the call's input tokens."""

    body: Mapping[str, Any]
    data: bytes

    @classmethod
    def of(cls, body: Mapping[str, Any]) -> WireRequest:
        return cls(body=body, data=encode_wire_body(body))


class AttemptOutcome(FrozenRecord):
    """What one attempt produced: a 200 body, or a failure with its cause."""

    http_status: int | None
    body: str | None
    cause: FailureCause | None
    detail: str | None
    retry_after_ms: int | None
    response: ModelResponse | None


def landed(status: int, body: str, response: ModelResponse) -> AttemptOutcome:
    """An attempt that got a 2xx reply (read into `response`, which may be unusable)."""
    return AttemptOutcome(
        http_status=status,
        body=body,
        cause=None,
        detail=None,
        retry_after_ms=None,
        response=response,
    )


def unanswered(cause: FailureCause, detail: str) -> AttemptOutcome:
    """An attempt with no HTTP answer (timeout, connection failure)."""
    return AttemptOutcome(
        http_status=None, body=None, cause=cause, detail=detail, retry_after_ms=None, response=None
    )


def refused(status: int, body: str, headers: Mapping[str, str]) -> AttemptOutcome:
    """An attempt the provider answered with an HTTP error status."""
    return AttemptOutcome(
        http_status=status,
        body=body,
        cause=cause_of_status(status),
        detail=f"HTTP {status}: {said}" if (said := server_message(body)) else f"HTTP {status}",
        retry_after_ms=parse_retry_after_ms(headers),
        response=None,
    )


REPLY_PREFIX_BYTES = 16 * 1024
"""How much of an oversized reply is kept in its envelope: enough to see what the server
was sending (an HTML page, a JSON prefix), never the body."""


def total_deadline_detail(timeout_s: float) -> str:
    return f"total deadline {timeout_s:g} s (timeout_s) passed"


def connect_timeout_detail(connect_timeout_s: float) -> str:
    return f"connect timeout {connect_timeout_s:g} s (connect_timeout_s) passed"


def read_timeout_detail(timeout_s: float) -> str:
    return f"read timeout: no byte for {timeout_s:g} s (timeout_s)"


async def within_deadline(timeout_s: float, attempt: Awaitable[AttemptOutcome]) -> AttemptOutcome:
    """`attempt` (one send and the whole reply read), ended when `timeout_s` has passed:
    a timeout whose detail names the total deadline. A TimeoutError the deadline did not
    raise is not relabelled."""
    deadline = asyncio.timeout(timeout_s)
    try:
        async with deadline:
            return await attempt
    except TimeoutError:
        if not deadline.expired():
            raise
        return unanswered("timeout", total_deadline_detail(timeout_s))


def reading_limit(max_reply_bytes: int, announced: int | None) -> int:
    """Bytes of a body to read before stopping: the cap, or only the kept prefix when the
    reply announced (Content-Length) more than the cap."""
    if announced is not None and announced > max_reply_bytes:
        return min(max_reply_bytes, REPLY_PREFIX_BYTES)
    return max_reply_bytes


def first_bytes(chunks: Iterable[bytes], count: int = REPLY_PREFIX_BYTES) -> bytes:
    """The first `count` bytes of the chunks, without joining the rest."""
    kept = bytearray()
    for chunk in chunks:
        kept += chunk[: count - len(kept)]
        if len(kept) >= count:
            break
    return bytes(kept)


class ReplyTooLargeError(Exception):
    """A reply body longer than `max_reply_bytes`, stopped while it was read (or before,
    when its Content-Length said so); carries what the envelope records."""

    def __init__(
        self,
        status: int,
        headers: Mapping[str, str],
        prefix: bytes,
        announced: int | None,
        max_reply_bytes: int,
        charset: str = "utf-8",
    ) -> None:
        super().__init__(f"reply larger than max_reply_bytes {max_reply_bytes}")
        self.status = status
        self.headers = headers
        self.prefix = prefix[:REPLY_PREFIX_BYTES]
        self.announced = announced
        self.max_reply_bytes = max_reply_bytes
        self.charset = charset

    def outcome(self) -> AttemptOutcome:
        return oversized(
            self.status,
            self.headers,
            self.prefix,
            self.announced,
            self.max_reply_bytes,
            self.charset,
        )


def oversized(
    status: int,
    headers: Mapping[str, str],
    prefix: bytes,
    announced: int | None,
    max_reply_bytes: int,
    charset: str = "utf-8",
) -> AttemptOutcome:
    """An attempt whose reply body passed `max_reply_bytes`: its first bytes are kept and
    its size as far as known is in the detail. A 2xx is an `oversize` drop (unusable: it
    cannot be parsed); an HTTP error keeps its status's cause, its body cut the same way."""
    kept = prefix[:REPLY_PREFIX_BYTES]
    if announced is not None and announced > max_reply_bytes:
        size = f"Content-Length {announced}, not read"
    else:
        size = f"more than {max_reply_bytes} bytes read, reading stopped"
    detail = (
        f"reply larger than max_reply_bytes {max_reply_bytes}: {size}; first {len(kept)} bytes kept"
    )
    body = kept.decode(charset, errors="replace")
    if 200 <= status < 300:
        return AttemptOutcome(
            http_status=status,
            body=body,
            cause="oversize",
            detail=detail,
            retry_after_ms=None,
            response=None,
        )
    return AttemptOutcome(
        http_status=status,
        body=body,
        cause=cause_of_status(status),
        detail=f"HTTP {status}; {detail}",
        retry_after_ms=parse_retry_after_ms(headers),
        response=None,
    )


SERVER_MESSAGE_CHARS = 200
"""How much of a refusal's own words an envelope's `failure_detail` keeps."""


def server_message(body: str | None) -> str | None:
    """What a server said when it refused a call, on one line and at most
    :data:`SERVER_MESSAGE_CHARS` long: the JSON error's message (OpenAI and Anthropic
    write `{"error": {"message": ...}}`; others `{"error": "..."}`, `{"message": ...}` or
    `{"detail": ...}`), else the start of the body. None for an empty body. The caller's
    envelope is redacted like every stored text."""
    if not body or not body.strip():
        return None
    said: object = body
    try:
        parsed = json.loads(body)
    except ValueError:
        parsed = None
    if isinstance(parsed, dict):
        error = parsed.get("error")
        if isinstance(error, dict):
            error = error.get("message")
        for candidate in (error, parsed.get("message"), parsed.get("detail")):
            if isinstance(candidate, str) and candidate.strip():
                said = candidate
                break
    text = " ".join(str(said).split())
    if len(text) > SERVER_MESSAGE_CHARS:
        text = text[: SERVER_MESSAGE_CHARS - 1] + "…"
    return text


def parse_retry_after_ms(headers: Mapping[str, str], now: datetime | None = None) -> int | None:
    """Milliseconds the server asked to wait: `retry-after-ms`, else `retry-after` (s or date)."""
    raw_ms = headers.get("retry-after-ms")
    if raw_ms:
        try:
            return max(0, round(float(raw_ms)))
        except ValueError:
            pass
    raw = headers.get("retry-after")
    if not raw:
        return None
    try:
        return max(0, round(float(raw) * 1000))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(raw)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    moment = now or datetime.now(UTC)
    return max(0, round((when - moment).total_seconds() * 1000))


def cause_of_status(status: int) -> FailureCause:
    """Retryable path failures (408 timeout, 429, 5xx) versus our own refused request."""
    if status == 408:
        return "timeout"
    if status == 429:
        return "429"
    if status >= 500:
        return "5xx"
    return "harness_4xx"


class Transport(Protocol):
    """Sends one wire body; returns the attempt's outcome without raising on HTTP failures."""

    def wire_body(self, request: ModelRequest) -> dict[str, Any]: ...

    async def send(self, wire: WireRequest, request: ModelRequest) -> AttemptOutcome: ...

    async def close(self) -> None: ...
