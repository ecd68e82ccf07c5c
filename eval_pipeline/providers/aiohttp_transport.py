"""The lean transport: Chat Completions over plain aiohttp, for OpenAI-compatible servers.

Which configs use it: every `api: openai_compatible` config (vLLM, Ollama, llama.cpp, the
simulated provider's OpenAI wire); see `transport_factory.transport_kind`. Why: such a server needs
nothing the `openai` SDK adds (its auth is a bearer token, it has no versioning headers),
and the SDK's request building is most of a call's CPU (3.8 million instructions a call
through the SDK transport against 1.65 million through this one, counted by callgrind),
which past about 64 calls in flight on two cores made the client, not the server, the
limit. This transport posts the bytes the harness serialized once (the bytes the budget
bounded) to `<base_url>/chat/completions` on one aiohttp session, and reads the raw body
back for :mod:`eval_pipeline.providers.wire` to parse.

It bounds and sorts an attempt exactly as the SDK transports do (`transport.AttemptOutcome`):
an attempt not done `timeout_s` after it began (the total deadline, however slowly the
bytes drip), a connect slower than `connect_timeout_s` or no byte for `timeout_s` is a
`timeout`, its detail naming which; a body longer than `max_reply_bytes` is stopped while
it is read (`oversize` for a 2xx, its first bytes kept); a refused, reset or closed
connection (also mid-body) is `connect`; an HTTP status outside 2xx goes through
`cause_of_status` with Retry-After read; redirects are not followed (a 3xx is our own
misconfigured URL: a harness error). Anything else (an invalid URL) is raised, not
swallowed. It never retries: the harness does, so every attempt is recorded.

The key is sent in the `Authorization` header only; request headers are never stored nor
logged, and nothing here logs.
"""

from __future__ import annotations

from typing import Any

import aiohttp
from yarl import URL

from eval_pipeline.errors import ConfigError
from eval_pipeline.providers.config import ModelConfig
from eval_pipeline.providers.transport import (
    AttemptOutcome,
    WireRequest,
    connect_timeout_detail,
    first_bytes,
    landed,
    oversized,
    read_timeout_detail,
    reading_limit,
    refused,
    unanswered,
    within_deadline,
)
from eval_pipeline.providers.types import ModelRequest
from eval_pipeline.providers.wire import parse_openai_body, wire_body

CHAT_COMPLETIONS_PATH = "/chat/completions"


class OpenAICompatibleTransport:
    """Posts a call's serialized wire body with aiohttp; one session per transport."""

    def __init__(self, config: ModelConfig, api_key: str, base_url: str | None) -> None:
        if not base_url:
            raise ConfigError(f"model {config.name}: openai_compatible needs base_url")
        self.config = config
        self.url = URL(base_url.rstrip("/") + CHAT_COMPLETIONS_PATH)
        self._headers = {
            "Authorization": f"Bearer {api_key}",
            "Content-Type": "application/json",
            "Accept": "application/json",
        }
        self._timeout = aiohttp.ClientTimeout(
            total=None, sock_connect=config.connect_timeout_s, sock_read=config.timeout_s
        )
        self._session: aiohttp.ClientSession | None = None

    def wire_body(self, request: ModelRequest) -> dict[str, Any]:
        return wire_body(self.config, request)

    def _open(self) -> aiohttp.ClientSession:
        """The session, made on first use (it belongs to the running event loop). The
        harness bounds calls in flight, so the pool itself is unbounded; no cookie is kept
        (none is needed, and the jar costs a filter on every request)."""
        if self._session is None:
            self._session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(limit=0),
                timeout=self._timeout,
                cookie_jar=aiohttp.DummyCookieJar(),
                trust_env=False,
            )
        return self._session

    def _request_headers(self, request: ModelRequest) -> dict[str, str]:
        header = self.config.seed_header
        if header and request.seed is not None:
            return {**self._headers, header: str(request.seed)}
        return self._headers

    async def send(self, wire: WireRequest, request: ModelRequest) -> AttemptOutcome:
        return await within_deadline(self.config.timeout_s, self._send(wire, request))

    async def _send(self, wire: WireRequest, request: ModelRequest) -> AttemptOutcome:
        session = self._open()
        cap = self.config.max_reply_bytes
        try:
            async with session.post(
                self.url,
                data=wire.data,
                headers=self._request_headers(request),
                allow_redirects=False,
            ) as reply:
                status = reply.status
                announced = reply.content_length
                limit = reading_limit(cap, announced)
                # Counted as it is read (decompressed, when the server compressed it):
                # never the whole body first.
                chunks: list[bytes] = []
                size = 0
                async for chunk in reply.content.iter_any():
                    chunks.append(chunk)
                    size += len(chunk)
                    if size > limit:
                        break
                charset = reply.charset or "utf-8"
                if size > limit or (announced is not None and announced > cap):
                    return oversized(
                        status, reply.headers, first_bytes(chunks), announced, cap, charset
                    )
                body = b"".join(chunks).decode(charset, errors="replace")
                if 200 <= status < 300:
                    return landed(status, body, parse_openai_body(body))
                return refused(status, body, reply.headers)
        except aiohttp.ConnectionTimeoutError:
            return unanswered("timeout", connect_timeout_detail(self.config.connect_timeout_s))
        except aiohttp.SocketTimeoutError:
            return unanswered("timeout", read_timeout_detail(self.config.timeout_s))
        except TimeoutError as error:  # aiohttp's socket timeouts are TimeoutErrors
            return unanswered("timeout", f"timeout: {type(error).__name__}")
        except (aiohttp.ClientConnectionError, aiohttp.ClientPayloadError) as error:
            return unanswered("connect", f"connection error: {type(error).__name__}")

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None
