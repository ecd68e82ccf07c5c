"""The official SDK transports: `openai` for Chat Completions, `anthropic` for Messages.

Imported only when a transport is made, so that importing the providers package (a
Dagster definitions load, a re-grade from stored envelopes) does not pay the SDKs'
import time (about 3 s here).

An attempt is bounded as in the aiohttp transport: a total deadline around the SDK's
whole call (`transport.within_deadline`: the SDKs' read timeout is httpx's, per chunk, so
a drip never trips it), a size cap counted as the body is read (an httpx response hook
wraps the body's byte stream before the SDK reads it; the reply is asked for
uncompressed, `Accept-Encoding: identity`, so the bytes counted are the body's), and no
redirect followed (the SDKs' aiohttp client follows them by default; httpx would turn the
POST into a GET to wherever the `Location` points).
"""

from __future__ import annotations

import itertools
import ssl
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import anthropic
import httpx2  # the HTTP client both SDKs are built on (their `httpx` fork)
import openai

from eval_pipeline.providers.config import ModelConfig
from eval_pipeline.providers.transport import (
    REPLY_PREFIX_BYTES,
    AttemptOutcome,
    ReplyTooLargeError,
    WireRequest,
    connect_timeout_detail,
    landed,
    read_timeout_detail,
    reading_limit,
    refused,
    unanswered,
    within_deadline,
)
from eval_pipeline.providers.types import ModelRequest, ModelResponse
from eval_pipeline.providers.wire import (
    parse_anthropic_body,
    parse_openai_body,
    wire_body,
)


def _timeout(config: ModelConfig) -> httpx2.Timeout:
    return httpx2.Timeout(config.timeout_s, connect=config.connect_timeout_s)


NO_COMPRESSION = {"Accept-Encoding": "identity"}
"""Asked of every reply, so that the size cap counts the body's own bytes."""


class _CappedStream(httpx2.AsyncByteStream):
    """A reply's byte stream that raises `ReplyTooLargeError` once it passes the limit."""

    def __init__(self, inner: httpx2.AsyncByteStream, response: httpx2.Response, cap: int):
        self._inner = inner
        self._response = response
        self._cap = cap

    async def __aiter__(self) -> AsyncIterator[bytes]:
        response = self._response
        announced = _content_length(response)
        limit = reading_limit(self._cap, announced)
        kept = bytearray()
        size = 0
        async for chunk in self._inner:
            size += len(chunk)
            if len(kept) < REPLY_PREFIX_BYTES:
                kept += chunk[: REPLY_PREFIX_BYTES - len(kept)]
            if size > limit:
                raise ReplyTooLargeError(
                    response.status_code,
                    response.headers,
                    bytes(kept),
                    announced,
                    self._cap,
                    response.charset_encoding or "utf-8",
                )
            yield chunk

    async def aclose(self) -> None:
        await self._inner.aclose()


def _content_length(response: httpx2.Response) -> int | None:
    try:
        return int(response.headers["content-length"])
    except (KeyError, ValueError):
        return None


def _reply_cap(cap: int) -> Any:
    """An httpx response hook: the body's stream, counted against `cap` as it is read."""

    async def hook(response: httpx2.Response) -> None:
        stream = response.stream
        if not isinstance(stream, httpx2.AsyncByteStream):
            raise TypeError(f"an async client's reply stream is a {type(stream).__name__}")
        response.stream = _CappedStream(stream, response, cap)

    return hook


def _http_client(sdk: Any, config: ModelConfig, tls: ssl.SSLContext) -> Any:
    """The SDK's aiohttp client with our timeouts, no redirects and the size cap.

    `tls` is shared by all of a transport's clients: made per client, each loaded the CA
    bundle again (about 21 ms of CPU), 0.7 s to open a transport at 256 in flight."""
    return sdk.DefaultAioHttpClient(
        verify=tls,
        timeout=_timeout(config),
        follow_redirects=False,
        event_hooks={"response": [_reply_cap(config.max_reply_bytes)]},
    )


def _headers(config: ModelConfig, request: ModelRequest) -> dict[str, str]:
    if config.seed_header and request.seed is not None:
        return {**NO_COMPRESSION, config.seed_header: str(request.seed)}
    return dict(NO_COMPRESSION)


def _exception_chain(error: BaseException) -> list[BaseException]:
    chain: list[BaseException] = []
    current: BaseException | None = error
    while current is not None and current not in chain:
        chain.append(current)
        current = current.__cause__ or current.__context__
    return chain


def _is_disconnect(error: BaseException) -> bool:
    """A connection the server closed, which the SDKs' aiohttp transport reports as a
    timeout (it maps every aiohttp.ClientConnectionError to ConnectTimeout)."""
    chain = _exception_chain(error)
    return any(isinstance(e, aiohttp.ClientConnectionError) for e in chain) and not any(
        isinstance(e, aiohttp.ServerTimeoutError | TimeoutError) for e in chain
    )


def _timeout_detail(error: BaseException, config: ModelConfig) -> str:
    """Which timeout fired, read from the exception chain."""
    chain = _exception_chain(error)
    if any(isinstance(e, httpx2.ConnectTimeout) for e in chain):
        return connect_timeout_detail(config.connect_timeout_s)
    if any(isinstance(e, httpx2.ReadTimeout) for e in chain):
        return read_timeout_detail(config.timeout_s)
    return f"timeout: {type(chain[-1]).__name__}"


def _failure(error: Exception, config: ModelConfig) -> AttemptOutcome:
    """Sort an SDK exception into a cause; an unknown exception is not swallowed."""
    too_large = next(
        (e for e in _exception_chain(error) if isinstance(e, ReplyTooLargeError)), None
    )
    if too_large is not None:  # the anthropic SDK wraps it in an APIConnectionError
        return too_large.outcome()
    if isinstance(error, openai.APITimeoutError | anthropic.APITimeoutError) and not (
        _is_disconnect(error)
    ):
        return unanswered("timeout", _timeout_detail(error, config))
    if isinstance(error, openai.APIStatusError | anthropic.APIStatusError):
        response = error.response
        return refused(response.status_code, response.text, response.headers)
    if isinstance(error, openai.APIConnectionError | anthropic.APIConnectionError):
        # APITimeoutError is an APIConnectionError: a disconnect mislabelled as a timeout
        # by the transport lands here, as the connection failure it is.
        cause = error.__cause__
        return unanswered(
            "connect", f"connection error: {type(cause).__name__ if cause else error}"
        )
    raise error


class _SdkTransport:
    """Posts the wire body through an official SDK client's own request machinery.

    The SDK does authentication, base URL, versioning headers, timeouts, the connection
    pool and the mapping of HTTP failures to its exceptions; the body is the one our wire
    adapter built and serialized once (the bytes the budget bounded), posted as `content`
    with the SDK's documented custom-request call (`client.post(..., cast_to=httpx.Response)`),
    which skips its typed-parameter transform and JSON encoding and hands back the raw
    response. The SDKs run on their aiohttp backend
    (`DefaultAioHttpClient`, the `aiohttp` extra): at 64 calls in flight on two cores it
    took the harness from 0.70 to 0.83 of the ideal rate. Calls are spread over several
    SDK clients so that no connection pool holds more than `connections_per_client`.
    """

    path = ""

    def __init__(self, config: ModelConfig, clients: list[Any]) -> None:
        self.config = config
        self._clients = clients
        self._next = itertools.cycle(clients)

    def wire_body(self, request: ModelRequest) -> dict[str, Any]:
        raise NotImplementedError

    def parse(self, body: str) -> ModelResponse:
        raise NotImplementedError

    async def send(self, wire: WireRequest, request: ModelRequest) -> AttemptOutcome:
        return await within_deadline(self.config.timeout_s, self._send(wire, request))

    async def _send(self, wire: WireRequest, request: ModelRequest) -> AttemptOutcome:
        client = next(self._next)
        options: dict[str, Any] = {"headers": _headers(self.config, request)}
        try:
            raw: httpx2.Response = await client.post(
                self.path, cast_to=httpx2.Response, content=wire.data, options=options
            )
        except ReplyTooLargeError as error:  # the openai SDK lets it through unwrapped
            return error.outcome()
        except (openai.APIError, anthropic.APIError) as error:
            return _failure(error, self.config)
        body = raw.text
        return landed(raw.status_code, body, self.parse(body))

    async def close(self) -> None:
        for client in self._clients:
            await client.close()


def _client_count(config: ModelConfig) -> int:
    return max(1, -(-config.max_in_flight // config.connections_per_client))


def _sdk_clients(
    sdk: Any, client_class: Any, config: ModelConfig, api_key: str, base_url: str | None
) -> list[Any]:
    """The transport's SDK clients (`client_class` of `sdk`), sharing one TLS context."""
    tls = httpx2.create_ssl_context()
    return [
        client_class(
            api_key=api_key,
            base_url=base_url,
            max_retries=0,
            timeout=_timeout(config),
            http_client=_http_client(sdk, config, tls),
        )
        for _ in range(_client_count(config))
    ]


class OpenAITransport(_SdkTransport):
    """Chat Completions through the `openai` SDK (OpenAI or any compatible server)."""

    path = "/chat/completions"

    def __init__(self, config: ModelConfig, api_key: str, base_url: str | None) -> None:
        super().__init__(
            config, _sdk_clients(openai, openai.AsyncOpenAI, config, api_key, base_url)
        )

    def wire_body(self, request: ModelRequest) -> dict[str, Any]:
        return wire_body(self.config, request)

    def parse(self, body: str) -> ModelResponse:
        return parse_openai_body(body)


class AnthropicTransport(_SdkTransport):
    """Messages through the `anthropic` SDK."""

    path = "/v1/messages"

    def __init__(self, config: ModelConfig, api_key: str, base_url: str | None) -> None:
        super().__init__(
            config, _sdk_clients(anthropic, anthropic.AsyncAnthropic, config, api_key, base_url)
        )

    def wire_body(self, request: ModelRequest) -> dict[str, Any]:
        return wire_body(self.config, request)

    def parse(self, body: str) -> ModelResponse:
        return parse_anthropic_body(body)
