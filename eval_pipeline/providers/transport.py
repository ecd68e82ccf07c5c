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
connect, timeout, 429, 5xx (retryable, the path's fault) and harness_4xx (our own request
refused: not retried, not a path drop).
"""

from __future__ import annotations

import email.utils
import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal, Protocol

from eval_pipeline.errors import ConfigError
from eval_pipeline.providers.config import ModelConfig
from eval_pipeline.providers.labels import FailureCause
from eval_pipeline.providers.types import ModelRequest, ModelResponse
from eval_pipeline.providers.wire import encode_wire_body
from eval_pipeline.records import FrozenRecord

TransportKind = Literal["aiohttp", "sdk"]


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


def transport_kind(config: ModelConfig) -> TransportKind:
    """Which transport sends the config's calls: plain aiohttp for OpenAI-compatible
    servers (the SDK more than doubles a call's CPU and adds nothing such a server
    needs), the official SDK for OpenAI and Anthropic themselves (their auth, versioning
    headers and error mapping are the SDKs' to keep right)."""
    return "aiohttp" if config.api == "openai_compatible" else "sdk"


def make_transport(
    config: ModelConfig, api_key: str, base_url: str | None, kind: TransportKind | None = None
) -> Transport:
    """The transport for the config (`kind` overrides `transport_kind`, for comparisons).

    The SDKs and aiohttp are imported only here, so that importing the package does not
    pay for them.
    """
    kind = kind or transport_kind(config)
    if kind == "aiohttp":
        if config.api == "anthropic_messages":
            raise ConfigError(f"model {config.name}: the aiohttp transport speaks OpenAI only")
        from eval_pipeline.providers import aiohttp_transport

        return aiohttp_transport.OpenAICompatibleTransport(config, api_key, base_url)
    from eval_pipeline.providers import sdk_transport

    if config.api == "anthropic_messages":
        return sdk_transport.AnthropicTransport(config, api_key, base_url)
    return sdk_transport.OpenAITransport(config, api_key, base_url)
