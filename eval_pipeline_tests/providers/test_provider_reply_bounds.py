"""A reply is bounded in time, in size and in where it is fetched from, in both transports.

Against loopback servers that misbehave on purpose, through the real harness and every
transport (`openai_compatible` on aiohttp, `openai_chat` and `anthropic_messages` on the
SDKs):

- a server that drips one byte at a time (well inside any read timeout) ends at the
  attempt's total deadline (`timeout_s`), labelled a timeout drop whose detail names the
  deadline: before, a drip kept the attempt alive as long as it dripped;
- a 50 MB body ends as an `oversize` drop, not retried, with the size seen in the detail
  and only a bounded prefix journaled, read with bounded memory: before, it was read
  whole and journaled several times (314.6 MB of journal for two calls);
- a 302 to another server is refused by both transports alike (a harness error; the other
  server sees nothing, so no key follows a redirect): before, the SDKs followed it.
"""

from __future__ import annotations

import asyncio
import json
import tracemalloc
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from eval_pipeline.providers.config import ModelConfig, RetryPolicy
from eval_pipeline.providers.harness import CallResult
from eval_pipeline.providers.transport import REPLY_PREFIX_BYTES, AttemptOutcome, within_deadline
from eval_pipeline_tests.providers.conftest import FAKE_KEY, FAST_RETRY
from eval_pipeline_tests.providers.test_provider_transports import (
    ANTHROPIC_REPLY,
    OPENAI_REPLY,
    config_for,
    one_call,
)

APIS = ["openai_compatible", "openai_chat", "anthropic_messages"]
DRIP_EVERY_S = 0.2
"""A byte this often: far inside the read timeout, so only a total deadline can end it."""
TIMEOUT_S = 0.6
GUARD_S = 30.0
"""The test's own bound, so a transport without a total deadline fails instead of hanging."""
BIG = 50 * 1024 * 1024
CHUNK = b"x" * (1024 * 1024)
TWO_ATTEMPTS = RetryPolicy(max_attempts=2, base_delay_s=0.001, max_delay_s=0.01, max_total_s=30)

Respond = Callable[[asyncio.StreamWriter, str], Awaitable[None]]


@dataclass
class RawServer:
    """A loopback HTTP/1.1 server written on asyncio streams, so a reply can be dripped or
    sent in any framing; it reads one request per connection and records its head."""

    respond: Respond
    heads: list[str] = field(default_factory=list)
    base_url: str = ""


@asynccontextmanager
async def raw_server(respond: Respond) -> AsyncIterator[RawServer]:
    server = RawServer(respond)
    handlers: set[asyncio.Task[None]] = set()

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        handlers.add(task)
        try:
            head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1")
            length = next(
                (
                    int(line.split(":", 1)[1])
                    for line in head.split("\r\n")
                    if line.lower().startswith("content-length:")
                ),
                0,
            )
            await reader.readexactly(length)
            server.heads.append(head)
            await server.respond(writer, head)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass  # the client hung up: what the bounds are for
        finally:
            writer.close()
            handlers.discard(task)

    listener = await asyncio.start_server(handle, "127.0.0.1", 0)
    host, port = listener.sockets[0].getsockname()[:2]
    server.base_url = f"http://{host}:{port}"
    try:
        yield server
    finally:
        listener.close()
        for handler in list(handlers):  # still dripping to a client that gave up
            handler.cancel()
        await asyncio.gather(*handlers, return_exceptions=True)


def reply_for(head: str) -> bytes:
    request_line = head.split("\r\n", 1)[0]
    reply = ANTHROPIC_REPLY if "/messages" in request_line else OPENAI_REPLY
    return json.dumps(reply).encode()


def head_of(status: str, headers: dict[str, str]) -> bytes:
    lines = [f"HTTP/1.1 {status}", *(f"{k}: {v}" for k, v in headers.items()), "", ""]
    return "\r\n".join(lines).encode()


async def drip_body(writer: asyncio.StreamWriter, head: str) -> None:
    writer.write(
        head_of("200 OK", {"Content-Type": "application/json", "Content-Length": "100000"})
    )
    while True:
        writer.write(b" ")
        await writer.drain()
        await asyncio.sleep(DRIP_EVERY_S)


async def drip_head(writer: asyncio.StreamWriter, head: str) -> None:
    for byte in head_of("200 OK", {"Content-Type": "application/json", "X-Pad": "p" * 200}):
        writer.write(bytes([byte]))
        await writer.drain()
        await asyncio.sleep(DRIP_EVERY_S)


@pytest.mark.parametrize("api", APIS)
@pytest.mark.parametrize("drip", [drip_body, drip_head], ids=["body", "head"])
def test_a_dripping_reply_ends_at_the_total_deadline(
    tmp_path: Path, api: str, drip: Respond
) -> None:
    async def served() -> tuple[CallResult, int]:
        async with raw_server(drip) as server:
            config = config_for(server.base_url, api, timeout_s=TIMEOUT_S, retry=TWO_ATTEMPTS)
            result = await asyncio.wait_for(one_call(tmp_path, config), GUARD_S)
            return result, len(server.heads)

    result, requests = asyncio.run(served())
    assert result.status == "infra_error"
    assert result.label.label == "drop" and result.label.drop_cause == "timeout"
    assert len(result.envelopes) == requests == TWO_ATTEMPTS.max_attempts  # retried as before
    for envelope in result.envelopes:
        assert envelope.failure_cause == "timeout"
        assert envelope.failure_detail == f"total deadline {TIMEOUT_S:g} s (timeout_s) passed"
        assert envelope.elapsed_ms < (TIMEOUT_S + 1.0) * 1000  # a loaded machine's slack


async def big_with_length(writer: asyncio.StreamWriter, head: str) -> None:
    writer.write(
        head_of("200 OK", {"Content-Type": "application/json", "Content-Length": str(BIG)})
    )
    for _ in range(BIG // len(CHUNK)):
        writer.write(CHUNK)
        await writer.drain()


async def big_chunked(writer: asyncio.StreamWriter, head: str) -> None:
    writer.write(
        head_of("200 OK", {"Content-Type": "application/json", "Transfer-Encoding": "chunked"})
    )
    for _ in range(BIG // len(CHUNK)):
        writer.write(b"%x\r\n" % len(CHUNK) + CHUNK + b"\r\n")
        await writer.drain()
    writer.write(b"0\r\n\r\n")
    await writer.drain()


@pytest.mark.parametrize("api", APIS)
@pytest.mark.parametrize("send", [big_with_length, big_chunked], ids=["length", "chunked"])
def test_an_oversized_reply_ends_bounded_and_is_not_journaled_whole(
    tmp_path: Path, api: str, send: Respond
) -> None:
    async def served() -> tuple[CallResult, int, int]:
        async with raw_server(send) as server:
            config = config_for(server.base_url, api)
            tracemalloc.start()
            try:
                result = await asyncio.wait_for(one_call(tmp_path, config), 60)
                peak = tracemalloc.get_traced_memory()[1]
            finally:
                tracemalloc.stop()
            return result, peak, len(server.heads)

    result, peak, requests = asyncio.run(served())
    cap = ModelConfig.model_fields["max_reply_bytes"].default
    assert cap <= 8 * 1024 * 1024
    final = result.final
    assert (result.status, final.failure_cause, final.http_status) == (
        "infra_error",
        "oversize",
        200,
    )
    assert result.label.label == "drop" and result.label.drop_cause == "oversize"
    assert len(result.envelopes) == requests == 1  # another attempt would read it again
    assert final.failure_detail is not None and f"max_reply_bytes {cap}" in final.failure_detail
    if send is big_with_length:
        assert f"Content-Length {BIG}" in final.failure_detail
    else:
        assert f"more than {cap} bytes" in final.failure_detail
    assert final.response_body is not None and 0 < len(final.response_body) <= REPLY_PREFIX_BYTES
    assert final.response_json is None
    assert final.cost_usd is None and final.reserved_usd is not None
    journal = tmp_path / "runs" / "run-1" / "envelopes.jsonl"
    assert journal.stat().st_size < REPLY_PREFIX_BYTES + 32 * 1024
    assert peak < 3 * cap, f"{peak} bytes traced at the peak"


def redirect_to(target: str) -> Respond:
    async def respond(writer: asyncio.StreamWriter, head: str) -> None:
        path = head.split(" ", 2)[1]
        writer.write(head_of("302 Found", {"Location": target + path, "Content-Length": "0"}))
        await writer.drain()

    return respond


async def answer(writer: asyncio.StreamWriter, head: str) -> None:
    body = reply_for(head)
    headers = {"Content-Type": "application/json", "Content-Length": str(len(body))}
    writer.write(head_of("200 OK", headers) + body)
    await writer.drain()


@pytest.mark.parametrize("api", APIS)
def test_a_redirect_is_refused_by_both_transports_alike(tmp_path: Path, api: str) -> None:
    async def served() -> tuple[CallResult, int, list[str]]:
        async with (
            raw_server(answer) as elsewhere,
            raw_server(redirect_to(elsewhere.base_url)) as server,
        ):
            config = config_for(server.base_url, api)
            result = await asyncio.wait_for(one_call(tmp_path, config), GUARD_S)
            return result, len(server.heads), elsewhere.heads

    result, asked, followed = asyncio.run(served())
    assert followed == [], "the redirect was followed to another server"
    assert asked == 1
    assert (result.status, result.final.http_status) == ("harness_error", 302)
    assert result.final.failure_cause == "harness_4xx"
    assert FAKE_KEY not in result.final.model_dump_json()


async def big_error(writer: asyncio.StreamWriter, head: str) -> None:
    writer.write(head_of("500 Internal Server Error", {"Content-Length": str(BIG)}))
    writer.write(b"<html>" + CHUNK[6:])
    for _ in range(BIG // len(CHUNK) - 1):
        writer.write(CHUNK)
        await writer.drain()


@pytest.mark.parametrize("api", ["openai_compatible", "openai_chat"])
def test_an_oversized_error_body_keeps_its_status_and_is_cut(tmp_path: Path, api: str) -> None:
    async def served() -> tuple[CallResult, int]:
        async with raw_server(big_error) as server:
            config = config_for(server.base_url, api)
            result = await asyncio.wait_for(one_call(tmp_path, config), GUARD_S)
            return result, len(server.heads)

    result, requests = asyncio.run(served())
    assert result.status == "infra_error" and result.label.drop_cause == "5xx"
    assert len(result.envelopes) == requests == FAST_RETRY.max_attempts  # retried, as before
    for envelope in result.envelopes:
        assert (envelope.http_status, envelope.failure_cause) == (500, "5xx")
        assert envelope.failure_detail is not None
        assert envelope.failure_detail.startswith("HTTP 500; reply larger than max_reply_bytes")
        assert envelope.response_body is not None
        assert envelope.response_body.startswith("<html>")
        assert len(envelope.response_body) <= REPLY_PREFIX_BYTES


def test_a_timeout_error_the_deadline_did_not_raise_is_not_relabelled() -> None:
    async def inner_timeout() -> AttemptOutcome:
        raise TimeoutError("not the deadline")

    with pytest.raises(TimeoutError, match="not the deadline"):
        asyncio.run(within_deadline(5.0, inner_timeout()))
