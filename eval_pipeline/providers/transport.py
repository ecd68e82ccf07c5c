"""Sending one attempt through an official SDK and reading what came back, raw.

The SDK clients are built with `max_retries=0`: the harness retries, so that every attempt
is recorded. The raw response is read (`with_raw_response`) and parsed by
:mod:`eval_pipeline.providers.wire`, so an empty or malformed 200 body becomes a labelled
reply rather than an exception. Failures are sorted into causes: connect, timeout, 429,
5xx (retryable, the path's fault) and harness_4xx (our own request refused: not retried,
not a path drop).
"""

from __future__ import annotations

import email.utils
import inspect
import time
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any, Protocol

import anthropic
import httpx2  # the HTTP client both SDKs are built on (their `httpx` fork)
import openai

from eval_pipeline.providers.config import ModelConfig
from eval_pipeline.providers.labels import FailureCause
from eval_pipeline.providers.types import ModelRequest, ModelResponse
from eval_pipeline.providers.wire import (
    anthropic_body,
    openai_body,
    parse_anthropic_body,
    parse_openai_body,
)
from eval_pipeline.records import FrozenRecord


class AttemptOutcome(FrozenRecord):
    """What one attempt produced: a 200 body, or a failure with its cause."""

    http_status: int | None
    body: str | None
    cause: FailureCause | None
    detail: str | None
    retry_after_ms: int | None
    response: ModelResponse | None


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

    async def send(self, wire: dict[str, Any], request: ModelRequest) -> AttemptOutcome: ...

    async def close(self) -> None: ...


def _timeout(config: ModelConfig) -> httpx2.Timeout:
    return httpx2.Timeout(config.timeout_s, connect=config.connect_timeout_s)


def _headers(config: ModelConfig, request: ModelRequest) -> dict[str, str]:
    if config.seed_header and request.seed is not None:
        return {config.seed_header: str(request.seed)}
    return {}


def _sdk_parameters(method: Callable[..., Any]) -> frozenset[str]:
    return frozenset(inspect.signature(method).parameters) - {
        "extra_headers",
        "extra_query",
        "extra_body",
        "timeout",
        "model",
        "self",
    }


OPENAI_PARAMETERS = _sdk_parameters(openai.resources.chat.AsyncCompletions.create)
ANTHROPIC_PARAMETERS = _sdk_parameters(anthropic.resources.AsyncMessages.create)


def split_for_sdk(
    wire: dict[str, Any], accepted: frozenset[str]
) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """Parameters the SDK method takes by name, and the rest (sent as `extra_body`).

    SDK versions drop or rename parameters (anthropic 2.x has no `temperature` argument);
    what the method does not take still goes into the JSON body, unchanged.
    """
    named = {name: value for name, value in wire.items() if name in accepted}
    rest = {name: value for name, value in wire.items() if name not in accepted}
    return named, rest or None


def _failure(error: Exception) -> AttemptOutcome:
    """Sort an SDK exception into a cause; an unknown exception is not swallowed."""
    if isinstance(error, openai.APITimeoutError | anthropic.APITimeoutError):
        return AttemptOutcome(
            http_status=None,
            body=None,
            cause="timeout",
            detail=f"timeout: {error}",
            retry_after_ms=None,
            response=None,
        )
    if isinstance(error, openai.APIStatusError | anthropic.APIStatusError):
        response = error.response
        return AttemptOutcome(
            http_status=response.status_code,
            body=response.text,
            cause=cause_of_status(response.status_code),
            detail=f"HTTP {response.status_code}",
            retry_after_ms=parse_retry_after_ms(response.headers),
            response=None,
        )
    if isinstance(error, openai.APIConnectionError | anthropic.APIConnectionError):
        cause = error.__cause__
        detail = f"connection error: {type(cause).__name__ if cause else error}"
        return AttemptOutcome(
            http_status=None,
            body=None,
            cause="connect",
            detail=detail,
            retry_after_ms=None,
            response=None,
        )
    raise error


def _landed(status: int, body: str, response: ModelResponse) -> AttemptOutcome:
    return AttemptOutcome(
        http_status=status,
        body=body,
        cause=None,
        detail=None,
        retry_after_ms=None,
        response=response,
    )


class OpenAITransport:
    """Chat Completions through the `openai` SDK (OpenAI or any compatible server)."""

    def __init__(self, config: ModelConfig, api_key: str, base_url: str | None) -> None:
        self.config = config
        self.client = openai.AsyncOpenAI(
            api_key=api_key, base_url=base_url, max_retries=0, timeout=_timeout(config)
        )

    def wire_body(self, request: ModelRequest) -> dict[str, Any]:
        body = openai_body(request, self.config.max_tokens_field)
        body.update(request.extra)
        return body

    async def send(self, wire: dict[str, Any], request: ModelRequest) -> AttemptOutcome:
        named, rest = split_for_sdk(wire, OPENAI_PARAMETERS)
        try:
            raw = await self.client.chat.completions.with_raw_response.create(
                model=self.config.model,
                extra_headers=_headers(self.config, request),
                extra_body=rest,
                **named,
            )
        except openai.APIError as error:
            return _failure(error)
        body = raw.http_response.text
        return _landed(raw.status_code, body, parse_openai_body(body))

    async def close(self) -> None:
        await self.client.close()


class AnthropicTransport:
    """Messages through the `anthropic` SDK."""

    def __init__(self, config: ModelConfig, api_key: str, base_url: str | None) -> None:
        self.config = config
        self.client = anthropic.AsyncAnthropic(
            api_key=api_key, base_url=base_url, max_retries=0, timeout=_timeout(config)
        )

    def wire_body(self, request: ModelRequest) -> dict[str, Any]:
        body = anthropic_body(request)
        body.update(request.extra)
        return body

    async def send(self, wire: dict[str, Any], request: ModelRequest) -> AttemptOutcome:
        named, rest = split_for_sdk(wire, ANTHROPIC_PARAMETERS)
        try:
            raw = await self.client.messages.with_raw_response.create(
                model=self.config.model,
                extra_headers=_headers(self.config, request),
                extra_body=rest,
                **named,
            )
        except anthropic.APIError as error:
            return _failure(error)
        body = raw.http_response.text
        return _landed(raw.status_code, body, parse_anthropic_body(body))

    async def close(self) -> None:
        await self.client.close()


def make_transport(config: ModelConfig, api_key: str, base_url: str | None) -> Transport:
    """The transport for the config's wire API."""
    if config.api == "anthropic_messages":
        return AnthropicTransport(config, api_key, base_url)
    return OpenAITransport(config, api_key, base_url)


def monotonic_ms(start: float) -> float:
    """Milliseconds since `start` (a `time.perf_counter()` value)."""
    return (time.perf_counter() - start) * 1000
