"""The two transports against a server that records what it received.

- Every transport sends the bytes the harness serialized once, and those are the bytes the
  budget bounded (the SDKs used to serialize the body again, with spaces: more bytes on
  the wire than the reservation priced).
- The lean transport (plain aiohttp, `openai_compatible` configs) posts to
  `<base_url>/chat/completions` with the key as a bearer token and the seed header, sorts
  failures like the SDK transports, follows no redirect, and lets no key reach the
  journal, the envelopes or the logs even when the server echoes the request's
  Authorization header back.
"""

from __future__ import annotations

import asyncio
import json
import logging
import ssl
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from eval_pipeline.paths import CONFIGS_DIR
from eval_pipeline.project_configs import load_price_book
from eval_pipeline.providers.config import (
    NO_KEY_PLACEHOLDER,
    NOT_IN_IDENTITY,
    ModelConfig,
    load_model_config,
    load_model_configs,
)
from eval_pipeline.providers.harness import CallResult, CallTag
from eval_pipeline.providers.labels import expect_answer
from eval_pipeline.providers.transport_factory import make_transport, transport_kind
from eval_pipeline.providers.types import Message, ModelRequest
from eval_pipeline.providers.wire import encode_wire_body, wire_body
from eval_pipeline_tests.providers.conftest import (
    BEFORE_TIER_CHANGE,
    FAKE_KEY,
    FAST_RETRY,
    KEY_ENV,
    new_session,
)

OPENAI_REPLY = {
    "id": "chatcmpl-1",
    "model": "tool-responder",
    "choices": [{"message": {"content": "ANSWER: 42"}, "finish_reason": "stop"}],
    "usage": {"prompt_tokens": 12, "completion_tokens": 3},
}
ANTHROPIC_REPLY = {
    "id": "msg_1",
    "model": "tool-responder",
    "content": [{"type": "text", "text": "ANSWER: 42"}],
    "stop_reason": "end_turn",
    "usage": {"input_tokens": 12, "output_tokens": 3},
}
Handler = Callable[[web.Request, bytes], Awaitable[web.StreamResponse]]


@dataclass
class Seen:
    """One request as the server received it."""

    path: str
    headers: dict[str, str]
    body: bytes


@dataclass
class Recorder:
    """A loopback HTTP server answering with `handler` and recording every request."""

    handler: Handler
    seen: list[Seen] = field(default_factory=list)
    base_url: str = ""


async def answer_200(request: web.Request, body: bytes) -> web.StreamResponse:
    reply = ANTHROPIC_REPLY if request.path.endswith("/messages") else OPENAI_REPLY
    return web.json_response(reply)


@asynccontextmanager
async def recording_server(handler: Handler = answer_200) -> AsyncIterator[Recorder]:
    recorder = Recorder(handler)

    async def endpoint(request: web.Request) -> web.StreamResponse:
        body = await request.read()
        recorder.seen.append(Seen(request.path, dict(request.headers), body))
        return await recorder.handler(request, body)

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", endpoint)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    host, port = runner.addresses[0][:2]
    recorder.base_url = f"http://{host}:{port}"
    try:
        yield recorder
    finally:
        await runner.cleanup()


def config_for(base_url: str, api: str, **extra: Any) -> ModelConfig:
    return ModelConfig.model_validate(
        {
            "name": f"recorded-{api}",
            "api": api,
            "provider": "simulated",
            "model": "tool-responder",
            "base_url": base_url if api == "anthropic_messages" else f"{base_url}/v1",
            "api_key_env": KEY_ENV,
            "seed_header": "x-evalp-seed",
            "retry": FAST_RETRY.model_dump(),
            "timeout_s": 5,
            "connect_timeout_s": 2,
            "input_token_overhead": 7,
            **extra,
        }
    )


def ask(text: str = "what is owed? é", seed: int | None = 3) -> ModelRequest:
    return ModelRequest(
        messages=(Message(role="user", content=text),), max_tokens=32, seed=seed, temperature=0.5
    )


async def one_call(
    tmp_path: Path, config: ModelConfig, request: ModelRequest | None = None
) -> CallResult:
    async with new_session(tmp_path) as session:
        return await session.client(config).call(
            request or ask(), CallTag(lane="m", case_id="c"), expect_answer("42")
        )


@pytest.mark.parametrize("api", ["openai_compatible", "openai_chat", "anthropic_messages"])
def test_the_bytes_sent_are_the_bytes_the_budget_bounded(tmp_path: Path, api: str) -> None:
    async def run() -> tuple[CallResult, list[Seen], ModelConfig]:
        async with recording_server() as server:
            config = config_for(server.base_url, api)
            return await one_call(tmp_path, config), server.seen, config

    result, seen, config = asyncio.run(run())
    assert result.status == "ok" and result.label.label == "right"
    [received] = seen
    request = ask()
    assert received.body == encode_wire_body(wire_body(config, request))
    assert json.loads(received.body) == wire_body(config, request)
    worst = load_price_book().worst_case(
        config.priced_as, BEFORE_TIER_CHANGE, len(received.body) + 7, request.max_tokens
    )
    assert result.final.reserved_usd == worst.cost_usd
    assert received.headers["Content-Type"] == "application/json"


def test_the_lean_transport_posts_to_chat_completions_with_key_and_seed(tmp_path: Path) -> None:
    async def run() -> list[Seen]:
        async with recording_server() as server:
            config = config_for(server.base_url, "openai_compatible")
            slash = config.model_copy(update={"base_url": f"{config.base_url}/"})
            await one_call(tmp_path, slash)
            await one_call(
                tmp_path, config_for(server.base_url, "openai_compatible"), ask(seed=None)
            )
            return server.seen

    seeded, unseeded = asyncio.run(run())
    assert seeded.path == unseeded.path == "/v1/chat/completions"
    assert seeded.headers["Authorization"] == f"Bearer {FAKE_KEY}"
    assert seeded.headers["x-evalp-seed"] == "3"
    assert "x-evalp-seed" not in unseeded.headers


def test_shipped_configs_use_the_documented_transport() -> None:
    """OpenAI-compatible servers on aiohttp; OpenAI and Anthropic through their SDKs."""
    kinds = {
        name: transport_kind(c) for name, c in load_model_configs(CONFIGS_DIR / "models").items()
    }
    assert {name for name, kind in kinds.items() if kind == "sdk"} == {
        "claude-sonnet-4-5",
        "gpt-4.1",
        "sim-planted-anthropic",
        "sim-small-anthropic",
        "sim-strong-anthropic",
        "sim-tool-responder-anthropic",
    }
    assert {name for name, kind in kinds.items() if kind == "aiohttp"} == {
        "local-llama",
        "sim-flaky",
        "sim-hesitant",
        "sim-judge",
        "sim-no-tools",
        "sim-planted",
        "sim-small",
        "sim-strong",
        "sim-tool-responder-openai",
        "sim-tool-user",
    }


async def echo_authorization(request: web.Request, body: bytes) -> web.StreamResponse:
    """A server that echoes the request's Authorization header: in a 401 body, JSON-escaped
    in a reply's text, and raw in a 500 body, by the request's seed."""
    token = request.headers["Authorization"].removeprefix("Bearer ")
    seed = request.headers.get("x-evalp-seed")
    if seed == "1":
        return web.json_response({"error": f"Incorrect API key provided: {token}"}, status=401)
    if seed == "2":
        reply = dict(OPENAI_REPLY)
        reply["choices"] = [{"message": {"content": f"ANSWER: {token}"}, "finish_reason": "stop"}]
        text = json.dumps(reply).replace(token[:4], "".join(f"\\u{ord(c):04x}" for c in token[:4]))
        return web.Response(text=text, content_type="application/json")
    return web.Response(text=f"upstream refused key {token}", status=500)


def test_the_lean_transport_keeps_an_echoed_key_out_of_everything_written(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    for name in ("aiohttp", "aiohttp.client", "aiohttp.internal", "eval_pipeline", "asyncio"):
        logging.getLogger(name).setLevel(logging.DEBUG)

    async def run() -> list[CallResult]:
        async with recording_server(echo_authorization) as server:
            config = config_for(server.base_url, "openai_compatible")
            async with new_session(tmp_path) as session:
                client = session.client(config)
                return [
                    await client.call(ask(seed=seed), CallTag(lane="m", case_id=str(seed)))
                    for seed in (1, 2, 3)
                ]

    refused, answered, failed = asyncio.run(run())
    assert refused.status == "harness_error" and refused.final.http_status == 401
    assert answered.status == "ok" and answered.label.answer == "[REDACTED]"
    assert failed.status == "infra_error" and len(failed.envelopes) == FAST_RETRY.max_attempts
    for result in (refused, answered, failed):
        for envelope in result.envelopes:
            assert FAKE_KEY not in envelope.model_dump_json()
            assert "[REDACTED]" in (envelope.response_body or "")
    written = [path for path in tmp_path.rglob("*") if path.is_file()]
    assert written
    for path in written:
        data = path.read_bytes()
        assert FAKE_KEY.encode() not in data, path
        assert FAKE_KEY[4:].encode() not in data, path
    assert FAKE_KEY not in caplog.text
    for record in caplog.records:
        assert FAKE_KEY not in str(record.__dict__)


async def redirect(request: web.Request, body: bytes) -> web.StreamResponse:
    if request.path == "/elsewhere":
        return web.json_response(OPENAI_REPLY)
    raise web.HTTPFound("/elsewhere")


async def close_mid_body(request: web.Request, body: bytes) -> web.StreamResponse:
    response = web.StreamResponse(status=200, headers={"Content-Length": "500"})
    await response.prepare(request)
    await response.write(b'{"choices": [')
    assert request.transport is not None
    request.transport.close()
    return response


async def created(request: web.Request, body: bytes) -> web.StreamResponse:
    return web.json_response(OPENAI_REPLY, status=201)


async def rate_limited(request: web.Request, body: bytes) -> web.StreamResponse:
    return web.json_response({"error": "slow down"}, status=429, headers={"retry-after-ms": "7"})


@pytest.mark.parametrize(
    ("handler", "status", "cause", "sent"),
    [
        (redirect, "harness_error", "harness_4xx", 1),
        (close_mid_body, "infra_error", "connect", FAST_RETRY.max_attempts),
        (created, "ok", None, 1),
        (rate_limited, "infra_error", "429", FAST_RETRY.max_attempts),
    ],
)
def test_the_lean_transport_sorts_outcomes_like_the_sdk_transports(
    tmp_path: Path, handler: Handler, status: str, cause: str | None, sent: int
) -> None:
    async def run() -> tuple[CallResult, list[Seen]]:
        async with recording_server(handler) as server:
            config = config_for(server.base_url, "openai_compatible")
            return await one_call(tmp_path, config), server.seen

    result, seen = asyncio.run(run())
    assert (result.status, result.final.failure_cause) == (status, cause)
    assert len(seen) == len(result.envelopes) == sent
    if cause == "429":
        assert all(e.retry_after_ms == 7 for e in result.envelopes)
        assert all(e.backoff_ms is not None and e.backoff_ms >= 7 for e in result.envelopes[:-1])


def test_a_refused_connection_is_a_connect_drop(tmp_path: Path) -> None:
    async def run() -> CallResult:
        async with recording_server() as server:
            base_url = server.base_url
        return await one_call(tmp_path, config_for(base_url, "openai_compatible"))

    result = asyncio.run(run())
    assert result.status == "infra_error"
    assert result.label.drop_cause == "connect"
    assert [e.failure_cause for e in result.envelopes] == ["connect"] * FAST_RETRY.max_attempts


async def no_connected_db(request: web.Request, body: bytes) -> web.StreamResponse:
    key = request.headers.get("Authorization", request.headers.get("x-api-key", ""))
    message = f"No connected db. (key {key.removeprefix('Bearer ')})"
    return web.json_response({"error": {"message": message}}, status=400)


@pytest.mark.parametrize("api", ["openai_compatible", "openai_chat", "anthropic_messages"])
def test_a_refusal_keeps_the_servers_own_message_in_its_detail_redacted(
    tmp_path: Path, api: str
) -> None:
    """Issue 25, finding 7: the detail of a 400 said only "HTTP 400"; the server's reason
    was in the stored body alone. It says what the server said, with any key redacted."""

    async def run() -> CallResult:
        async with recording_server(no_connected_db) as server:
            return await one_call(tmp_path, config_for(server.base_url, api))

    result = asyncio.run(run())
    assert result.status == "harness_error"
    assert result.final.failure_detail == "HTTP 400: No connected db. (key [REDACTED])"


async def check_key(request: web.Request, body: bytes) -> web.StreamResponse:
    """A server started with a key (vLLM's --api-key, a gateway): 401 for any other."""
    if request.headers.get("Authorization") != "Bearer local-secret":
        return web.json_response({"error": {"message": "invalid api key"}}, status=401)
    return web.json_response(OPENAI_REPLY)


def test_the_shipped_local_config_sends_its_key_when_set_and_a_placeholder_when_not(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`local-llama.yaml` against a standard OpenAI-compatible server that checks a key
    (it once had no key variable and sent the placeholder, which such a server refuses)."""
    shipped = load_model_config(CONFIGS_DIR / "models" / "local-llama.yaml")
    assert shipped.context_window_tokens is not None  # `evalp sweep --dry-run` can bound it

    async def run() -> tuple[CallResult, CallResult, list[Seen]]:
        async with recording_server(check_key) as server:
            config = shipped.model_copy(
                update={"base_url": f"{server.base_url}/v1", "retry": FAST_RETRY}
            )
            monkeypatch.setenv(str(shipped.api_key_env), "local-secret")
            keyed = await one_call(tmp_path / "keyed", config)
            monkeypatch.delenv(str(shipped.api_key_env))
            unkeyed = await one_call(tmp_path / "unkeyed", config)
            return keyed, unkeyed, server.seen

    keyed, unkeyed, seen = asyncio.run(run())
    assert keyed.status == "ok"
    assert seen[0].headers["Authorization"] == "Bearer local-secret"
    assert seen[-1].headers["Authorization"] == f"Bearer {NO_KEY_PLACEHOLDER}"
    assert unkeyed.status != "ok"  # this server checks keys: refused, not a crash


def test_an_optional_key_is_only_for_an_openai_compatible_server_with_a_key_variable() -> None:
    base = {"name": "x", "provider": "p", "model": "m", "api_key_optional": True}
    with pytest.raises(ValueError, match="api_key_optional"):
        ModelConfig.model_validate({**base, "api": "openai_compatible"})
    with pytest.raises(ValueError, match="api_key_optional"):
        ModelConfig.model_validate({**base, "api": "openai_chat", "api_key_env": "K"})
    config = ModelConfig.model_validate({**base, "api": "openai_compatible", "api_key_env": "K"})
    assert "api_key_optional" not in config.model_dump(exclude=NOT_IN_IDENTITY)


def test_how_many_calls_are_in_flight_is_not_part_of_a_runs_identity() -> None:
    """Raising a provider's `max_in_flight` (the run queue's share) re-runs nothing kept."""
    from eval_pipeline.lanes.partition_runs import LaneSettings

    base = {"name": "x", "provider": "p", "model": "m", "api": "openai_chat", "api_key_env": "K"}
    slow = ModelConfig.model_validate({**base, "max_in_flight": 8, "connections_per_client": 2})
    fast = ModelConfig.model_validate({**base, "max_in_flight": 128})
    settings = LaneSettings(lane="product")
    assert settings.identity(slow, "fx-1") == settings.identity(fast, "fx-1")
    timeout = ModelConfig.model_validate({**base, "timeout_s": 5})
    assert settings.identity(timeout, "fx-1") != settings.identity(fast, "fx-1")


@pytest.mark.parametrize("api", ["openai_chat", "anthropic_messages"])
def test_an_sdk_transport_loads_the_ca_bundle_once_for_all_its_clients(
    monkeypatch: pytest.MonkeyPatch, api: str
) -> None:
    """64 in flight is eight SDK clients. Each made its own TLS context, loading the CA
    bundle again (about 21 ms of CPU each here), so that opening a transport at 256 in
    flight cost 0.7 s. One context, verifying as the SDKs' default does, serves them all."""
    import httpcore2  # the SDKs' HTTP core, which makes the default TLS context

    made: list[ssl.SSLContext] = []
    default_context = httpcore2.default_ssl_context

    def counted(*args: Any, **kwargs: Any) -> ssl.SSLContext:
        made.append(default_context(*args, **kwargs))
        return made[-1]

    monkeypatch.setattr(httpcore2, "default_ssl_context", counted)
    config = config_for("https://provider.invalid/v1", api).model_copy(update={"max_in_flight": 64})

    async def open_and_close() -> int:
        transport = make_transport(config, FAKE_KEY, config.base_url, "sdk")
        clients = len(transport._clients)  # type: ignore[attr-defined]
        await transport.close()
        return clients

    assert asyncio.run(open_and_close()) == 8
    [context] = made
    assert context.verify_mode == ssl.CERT_REQUIRED and context.check_hostname
