"""The simulated provider's HTTP server (Starlette on uvicorn, loopback).

Model endpoints (``POST /v1/chat/completions``, ``POST /v1/messages``) are raw ASGI
endpoints: read the body, decide the outcome synchronously (:meth:`SimState.handle`), sleep
the configured latency with ``asyncio.sleep``, send. Nothing is logged per request, and
of the request headers only ``x-evalp-seed`` is ever read; none is stored.

Admin: ``GET /_sim/health``, ``GET /_sim/counters``, ``GET /_sim/usage`` (unpriced bill),
``GET /_sim/bill``, ``POST /_sim/reset`` (bill, counters and occurrence memory; not the
clock, nor the profile error count), ``POST /_sim/clock`` with ``{"date": "YYYY-MM-DD" | null}``.

Tenants: ``POST /_sim/tenants`` with ``{"name": ..., "request_log": path | null}`` adds model
endpoints under ``/t/<name>`` (``/t/<name>/v1/chat/completions``, ``/t/<name>/v1/messages``)
with their own counters, occurrence memory, usage and request log, as a server of their own
would have: what several call sessions of one run share is the process, not the state (two
lanes send the same first request; in one state the second would be a retry of the first).
A tenant bills on the server's clock, and its profile errors count in the server's
counters; ``GET /_sim/tenants/<name>/counters`` gives its own.

A profile that raises (or returns something that is not an outcome) is a bug in the
simulator, not planted flakiness: it is counted apart (``profile_errors`` in the
counters) and answered with a 500 whose error type is ``sim_profile_error`` and which
carries the header ``x-evalp-sim-profile-error``, so it cannot pass for a planted 5xx.

With a request log (``SimConfig.request_log``) every model request is appended to a
JSON-lines file as it is decided (billed or not, with its usage), flushed at once: the
provider's own record, to compare with what the client journaled even after a crash.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import errno
import hashlib
import json
import math
import os
import re
import secrets
import socket
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from typing import IO, Any, Literal, TextIO

import uvicorn
from starlette.applications import Starlette
from starlette.middleware.errors import ServerErrorMiddleware
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from eval_pipeline.sim import wire_anthropic, wire_openai
from eval_pipeline.sim.bill import SimUsageLine, price_lines
from eval_pipeline.sim.errors import ProfileError, SimAdminError, SimError, SimRequestError
from eval_pipeline.sim.neutral import (
    ConnectionDrop,
    ErrorStatus,
    Outcome,
    RawBody,
    Reply,
    SimRequest,
    WireFormat,
)
from eval_pipeline.sim.profiles import Profile, build_profiles, discover_profiles
from eval_pipeline.sim.tokens import fit_reply, input_tokens
from eval_pipeline.sim.wire_common import ParsedRequest

LISTENING_PREFIX = "SIM LISTENING "
TENANT_PREFIX = "/t"
"""A tenant's model endpoints are under ``/t/<name>`` (``/t/<name>/v1/messages``, ...)."""
TENANT_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")
SEED_HEADER = b"x-evalp-seed"
PROFILE_ERROR_TYPE = "sim_profile_error"
PROFILE_ERROR_HEADER = "x-evalp-sim-profile-error"
_PARENT_POLL_S = 0.2
_RAW_SEND = "evalp.raw_send"
_JSON = b"application/json"
_OUTCOME_TYPES = (Reply, ErrorStatus, RawBody, ConnectionDrop)


@dataclass(frozen=True)
class SimConfig:
    """How one server process behaves."""

    seed: int = 0
    latency_ms: float = 0.0
    profile_options: Mapping[str, Any] | None = None
    plugins: Sequence[str] = ()
    request_log: str | None = None

    def __post_init__(self) -> None:
        # A negative or non-finite delay is a typo, not a request for none (or forever).
        if not (math.isfinite(self.latency_ms) and self.latency_ms >= 0):
            raise SimError(
                f"latency_ms must be a finite number of milliseconds >= 0, got {self.latency_ms!r}"
            )
        if self.seed < 0:
            raise SimError(f"the server seed must be >= 0, got {self.seed}")


@dataclass(slots=True)
class Plan:
    """What to send for one model request (``drop``: close the connection instead)."""

    status: int = 200
    headers: list[tuple[bytes, bytes]] = field(default_factory=list)
    body: bytes = b""
    drop: bool = False
    delay_s: float = 0.0


class SimState:
    """Profiles, counters, occurrence memory, clock and usage lines of one server process,
    or of one of its tenants (`parent`: the server's own state, whose clock the tenant
    bills on and whose count of profile errors includes the tenant's)."""

    def __init__(self, config: SimConfig, parent: SimState | None = None) -> None:
        discover_profiles(config.plugins)
        self.config = config
        self.parent = parent
        self.seed = config.seed
        self.latency_s = config.latency_ms / 1000.0
        self.profiles: dict[str, Profile] = build_profiles(config.seed, config.profile_options)
        self.clock: date | None = None
        self._run = secrets.token_hex(4)
        self._next_id = 0
        self.request_count = 0
        self.outcomes: Counter[str] = Counter()
        self.profile_errors = 0
        self.last_profile_error: str | None = None
        self.occurrences: dict[str, int] = {}
        self.usage: list[SimUsageLine] = []
        self._log: IO[str] | None = None
        if config.request_log:
            os.makedirs(os.path.dirname(os.path.abspath(config.request_log)), exist_ok=True)
            self._log = open(config.request_log, "a", encoding="utf-8")  # noqa: SIM115

    def reset(self) -> None:
        """Forget bill, counters and occurrences; profile errors are kept (a simulator bug
        is not forgotten between tests)."""
        self.request_count = 0
        self.outcomes.clear()
        self.occurrences.clear()
        self.usage.clear()

    def close(self) -> None:
        if self._log is not None:
            self._log.close()
            self._log = None

    def _log_request(self, token: str, wire: WireFormat, kind: str, plan: Plan) -> None:
        if self._log is None:
            return
        line: dict[str, Any] = {"request_id": "req_" + token, "wire_format": wire}
        line.update(outcome=kind, http_status=None if plan.drop else plan.status)
        billed = self.usage[-1] if kind == "Reply" and self.usage else None
        line["bill"] = billed.model_dump(mode="json") if billed is not None else None
        self._log.write(json.dumps(line) + "\n")
        self._log.flush()

    def today(self) -> date:
        if self.parent is not None:
            return self.parent.today()
        return self.clock if self.clock is not None else datetime.now(UTC).date()

    def usage_lines(self) -> list[SimUsageLine]:
        return list(self.usage)

    def _new_id(self) -> str:
        self._next_id += 1
        return f"sim{self._run}{self._next_id:08d}"

    def handle(self, wire: WireFormat, body: bytes, seed_header: bytes | None) -> Plan:
        """Decide and render the response to one model request."""
        self.request_count += 1
        token = self._new_id()
        try:
            outcome, request = self._decide(wire, body, seed_header)
        except SimRequestError as exc:
            outcome, request = ErrorStatus(status=400, message=str(exc)), None
        kind = type(outcome).__name__
        if isinstance(outcome, ErrorStatus) and outcome.error_type == PROFILE_ERROR_TYPE:
            kind = "ProfileError"
        self.outcomes[kind] += 1
        plan = self._plan(wire, outcome, request, token)
        self._log_request(token, wire, kind, plan)
        return plan

    def _plan(
        self, wire: WireFormat, outcome: Outcome, request: SimRequest | None, token: str
    ) -> Plan:
        if isinstance(outcome, Reply) and request is not None:
            return self._render_reply(wire, outcome, request, token)
        if isinstance(outcome, ErrorStatus):
            return self._render_error(wire, outcome, token)
        if isinstance(outcome, RawBody):
            return Plan(
                status=outcome.status,
                headers=[
                    (b"content-type", outcome.content_type.encode("latin-1")),
                    (b"content-length", str(len(outcome.body)).encode()),
                    *_request_id_header(wire, "req_" + token),
                ],
                body=outcome.body,
            )
        if isinstance(outcome, ConnectionDrop):
            return Plan(drop=True)
        raise SimError(f"a profile returned {outcome!r}, which is not an outcome")

    def _profile_failed(self, name: str, what: str) -> ErrorStatus:
        """A bug in a profile: counted apart and answered with its own marker."""
        self.profile_errors += 1
        self.last_profile_error = f"profile {name!r} {what}"
        if self.parent is not None:  # a simulator bug anywhere in the server is the server's
            self.parent.profile_errors += 1
            self.parent.last_profile_error = self.last_profile_error
        print(f"sim: PROFILE ERROR: {self.last_profile_error}", file=sys.stderr, flush=True)
        return ErrorStatus(
            status=500,
            message=f"simulated provider bug: profile {name!r} failed (see the sim's stderr)",
            error_type=PROFILE_ERROR_TYPE,
            headers=((PROFILE_ERROR_HEADER, name),),
        )

    def _decide(
        self, wire: WireFormat, body: bytes, seed_header: bytes | None
    ) -> tuple[Outcome, SimRequest | None]:
        try:
            data = json.loads(body)
        except ValueError as exc:
            raise SimRequestError(f"the request body is not valid JSON: {exc}") from exc
        if not isinstance(data, dict):
            raise SimRequestError("the request body must be a JSON object")
        model = data.get("model")
        if not isinstance(model, str) or not model:
            raise SimRequestError("'model' must be a non-empty string")
        name, colon, variant_text = model.partition(":")
        variant = variant_text if colon else None
        profile = self.profiles.get(name)
        if profile is None or not profile.accepts_variant(variant):
            return _unknown_model(wire, model), None
        parsed: ParsedRequest = (wire_openai if wire == "openai" else wire_anthropic).parse(data)
        header_seed: int | None = None
        if seed_header is not None:
            try:
                header_seed = int(seed_header)
            except ValueError as exc:
                raise SimRequestError("header x-evalp-seed must be an integer") from exc
        replicate_seed = parsed.seed if parsed.seed is not None else header_seed
        hasher = hashlib.blake2b(wire.encode(), digest_size=16)
        hasher.update(b"\0" + (seed_header or b"") + b"\0")
        hasher.update(body)
        digest = hasher.hexdigest()
        occurrence = self.occurrences.get(digest, 0)
        self.occurrences[digest] = occurrence + 1
        request = SimRequest(
            wire_format=wire,
            model=model,
            profile=name,
            variant=variant,
            system=parsed.system,
            messages=parsed.messages,
            tools=parsed.tools,
            tool_choice=parsed.tool_choice,
            max_tokens=parsed.max_tokens,
            temperature=parsed.temperature,
            replicate_seed=replicate_seed,
            occurrence=occurrence,
            server_seed=self.seed,
            body_digest=digest,
        )
        try:
            outcome = profile.respond(request)
        except Exception as exc:  # noqa: BLE001 - a profile bug is counted and answered apart
            return self._profile_failed(name, f"failed: {exc!r}"), request
        if not isinstance(outcome, _OUTCOME_TYPES):
            what = f"returned a {type(outcome).__name__}, not an outcome"
            return self._profile_failed(name, what), request
        return outcome, request

    def _render_reply(
        self, wire: WireFormat, reply: Reply, request: SimRequest, token: str
    ) -> Plan:
        tokens_in = input_tokens(request) if reply.input_tokens is None else reply.input_tokens
        cache_read = min(reply.cache_read_tokens, tokens_in)
        # The OpenAI format reports no cache writes: there they are plain input.
        cache_write = (
            0 if wire == "openai" else min(reply.cache_write_tokens, tokens_in - cache_read)
        )
        plain_in = tokens_in - cache_read - cache_write
        delay_s = reply.delay_ms / 1000
        reply, tokens_out = fit_reply(reply, request.max_tokens)
        call_ids = [
            call.id or _tool_call_id(wire, request.body_digest, i)
            for i, call in enumerate(reply.tool_calls)
        ]
        if wire == "openai":
            response_id = "chatcmpl-" + token
            body = wire_openai.render_reply(
                reply,
                response_id=response_id,
                created=int(time.time()),
                model=request.model,
                tool_call_ids=call_ids,
                input_tokens=tokens_in,
                output_tokens=tokens_out,
                cache_read_tokens=cache_read,
            )
        else:
            response_id = "msg_" + token
            body = wire_anthropic.render_reply(
                reply,
                response_id=response_id,
                model=request.model,
                tool_call_ids=call_ids,
                input_tokens=plain_in,
                output_tokens=tokens_out,
                cache_read_tokens=cache_read,
                cache_write_tokens=cache_write,
            )
        self.usage.append(
            SimUsageLine(
                request_id=response_id,
                day=self.today(),
                model=request.model,
                wire_format=wire,
                input_tokens=plain_in,
                output_tokens=tokens_out,
                cache_read_tokens=cache_read,
                cache_write_tokens=cache_write,
            )
        )
        return Plan(
            headers=[
                (b"content-type", _JSON),
                (b"content-length", str(len(body)).encode()),
                *_request_id_header(wire, "req_" + token),
            ],
            body=body,
            delay_s=delay_s,
        )

    @staticmethod
    def _render_error(wire: WireFormat, error: ErrorStatus, token: str) -> Plan:
        request_id = "req_" + token
        if wire == "openai":
            body = wire_openai.render_error(error)
        else:
            body = wire_anthropic.render_error(error, request_id)
        headers = [
            (b"content-type", _JSON),
            (b"content-length", str(len(body)).encode()),
            *_request_id_header(wire, request_id),
        ]
        if error.retry_after_s is not None:
            headers.append((b"retry-after", str(error.retry_after_s).encode()))
        if error.retry_after_ms is not None:
            headers.append((b"retry-after-ms", str(error.retry_after_ms).encode()))
        headers.extend((k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in error.headers)
        return Plan(status=error.status, headers=headers, body=body)


def _request_id_header(wire: WireFormat, request_id: str) -> tuple[tuple[bytes, bytes]]:
    name = b"x-request-id" if wire == "openai" else b"request-id"
    return ((name, request_id.encode()),)


def _tool_call_id(wire: WireFormat, digest: str, index: int) -> str:
    suffix = hashlib.blake2b(f"{digest}:{index}".encode(), digest_size=12).hexdigest()
    return ("call_" if wire == "openai" else "toolu_") + suffix


def _unknown_model(wire: WireFormat, model: str) -> ErrorStatus:
    if wire == "openai":
        message = f"The model `{model}` does not exist or you do not have access to it."
    else:
        message = f"model: {model}"
    return ErrorStatus(status=404, message=message)


async def _read_body(receive: Receive) -> bytes:
    message = await receive()
    body: bytes = message.get("body", b"")
    if not message.get("more_body", False):
        return body
    chunks = [body]
    while message.get("more_body", False):
        message = await receive()
        chunks.append(message.get("body", b""))
    return b"".join(chunks)


async def _drop_connection(scope: Scope, receive: Receive) -> None:
    """Close the TCP connection under this request without writing a response."""
    raw_send = scope.get(_RAW_SEND)
    cycle = getattr(raw_send, "__self__", None)
    transport = getattr(cycle, "transport", None)
    close = getattr(transport, "close", None)
    if not callable(close):
        raise SimError("cannot drop the connection: the server does not expose its transport")
    close()
    # Wait for uvicorn to see the disconnect, so it does not try to answer with a 500.
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(receive(), timeout=1.0)


class ModelEndpoint:
    """ASGI endpoint of one wire format."""

    def __init__(self, state: SimState, wire: WireFormat) -> None:
        self.state = state
        self.wire: WireFormat = wire

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        body = await _read_body(receive)
        seed_header: bytes | None = None
        for name, value in scope["headers"]:
            if name == SEED_HEADER:
                seed_header = value
                break
        plan = self.state.handle(self.wire, body, seed_header)
        if self.state.latency_s + plan.delay_s > 0:
            await asyncio.sleep(self.state.latency_s + plan.delay_s)
        if plan.drop:
            await _drop_connection(scope, receive)
            return
        await send({"type": "http.response.start", "status": plan.status, "headers": plan.headers})
        await send({"type": "http.response.body", "body": plan.body})


class _KeepRawSend:
    """Outermost ASGI layer: keeps uvicorn's own ``send`` in the scope (to reach the
    transport for a connection drop), since Starlette's middleware wraps it; and serves
    the model endpoints itself, under Starlette's own 500 handler.

    A model request answered through Starlette's router and exception layers cost the
    server a fifth of its CPU per call in those layers alone; the endpoints are raw ASGI
    and need nothing from them (no path parameters, no request object, no handled
    exception), so an exact POST path goes straight to its endpoint wrapped in
    `ServerErrorMiddleware` — the layer that answers an unhandled error with the same
    500 — and every other request (another method, a trailing slash, the admin routes)
    still goes through the application, which answers it as before.
    """

    def __init__(
        self,
        app: Starlette,
        state: SimState,
        models: Mapping[str, ModelEndpoint],
        tenants: Mapping[str, SimState],
    ) -> None:
        self.app = app
        self.state = state
        self.tenants = tenants
        self.models: dict[str, ServerErrorMiddleware] = {}
        self.add_models(models)

    def close(self) -> None:
        """Close the request logs of the server and of its tenants."""
        self.state.close()
        for tenant in self.tenants.values():
            tenant.close()

    def add_models(self, models: Mapping[str, ModelEndpoint]) -> None:
        self.models.update(
            (path, ServerErrorMiddleware(endpoint)) for path, endpoint in models.items()
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        scope[_RAW_SEND] = send
        if scope["type"] == "http" and scope["method"] == "POST" and not scope.get("root_path"):
            model = self.models.get(scope["path"])
            if model is not None:
                await model(scope, receive, send)
                return
        await self.app(scope, receive, send)


def _model_endpoints(state: SimState, prefix: str = "") -> dict[str, ModelEndpoint]:
    return {
        f"{prefix}/v1/chat/completions": ModelEndpoint(state, "openai"),
        f"{prefix}/v1/messages": ModelEndpoint(state, "anthropic"),
    }


def _counters(state: SimState) -> dict[str, Any]:
    return {
        "request_count": state.request_count,
        "outcomes": dict(state.outcomes),
        "billed": len(state.usage),
        "profile_errors": state.profile_errors,
        "last_profile_error": state.last_profile_error,
    }


def build_app(config: SimConfig) -> _KeepRawSend:
    """The ASGI application of one simulated provider."""
    state = SimState(config)
    tenants: dict[str, SimState] = {}

    async def health(_: Request) -> JSONResponse:
        return JSONResponse(
            {
                "status": "ok",
                "seed": state.seed,
                "latency_ms": state.latency_s * 1000.0,
                "profiles": sorted(state.profiles),
                "request_count": state.request_count,
                "clock": state.clock.isoformat() if state.clock else None,
            }
        )

    async def counters(_: Request) -> JSONResponse:
        return JSONResponse(_counters(state))

    async def add_tenant(request: Request) -> JSONResponse:
        try:
            payload = await request.json()
            name, log = payload["name"], payload.get("request_log")
            if not isinstance(name, str) or not TENANT_NAME.fullmatch(name):
                raise ValueError(f"name {name!r} is not {TENANT_NAME.pattern}")
            if log is not None and not isinstance(log, str):
                raise ValueError(f"request_log {log!r} is not a path")
        except (ValueError, KeyError, TypeError) as exc:
            return JSONResponse(
                {"error": f'expected {{"name": ..., "request_log": path | null}}: {exc}'},
                status_code=400,
            )
        if name in tenants:
            return JSONResponse({"error": f"tenant {name!r} exists"}, status_code=409)
        tenant = SimState(dataclasses.replace(config, request_log=log), parent=state)
        tenants[name] = tenant
        raw.add_models(_model_endpoints(tenant, f"{TENANT_PREFIX}/{name}"))
        return JSONResponse({"name": name, "path": f"{TENANT_PREFIX}/{name}"})

    async def tenant_counters(request: Request) -> JSONResponse:
        tenant = tenants.get(request.path_params["name"])
        if tenant is None:
            return JSONResponse({"error": "no such tenant"}, status_code=404)
        return JSONResponse(_counters(tenant))

    async def usage(_: Request) -> JSONResponse:
        return JSONResponse(
            {"lines": [line.model_dump(mode="json") for line in state.usage_lines()]}
        )

    async def bill(_: Request) -> JSONResponse:
        try:
            lines = price_lines(state.usage_lines())
        except SimAdminError as exc:
            return JSONResponse({"error": str(exc)}, status_code=500)
        return JSONResponse({"lines": [line.model_dump(mode="json") for line in lines]})

    async def reset(_: Request) -> JSONResponse:
        state.reset()
        return JSONResponse({"status": "ok"})

    async def clock(request: Request) -> JSONResponse:
        try:
            payload = await request.json()
            raw = payload["date"]
            day = None if raw is None else date.fromisoformat(raw)
        except (ValueError, KeyError, TypeError) as exc:
            return JSONResponse(
                {"error": f'expected {{"date": "YYYY-MM-DD" | null}}: {exc}'}, status_code=400
            )
        state.clock = day
        return JSONResponse({"date": day.isoformat() if day else None})

    models = _model_endpoints(state)
    app = Starlette(
        routes=[
            *(Route(path, endpoint, methods=["POST"]) for path, endpoint in models.items()),
            Route("/_sim/health", health, methods=["GET"]),
            Route("/_sim/counters", counters, methods=["GET"]),
            Route("/_sim/usage", usage, methods=["GET"]),
            Route("/_sim/bill", bill, methods=["GET"]),
            Route("/_sim/reset", reset, methods=["POST"]),
            Route("/_sim/clock", clock, methods=["POST"]),
            Route("/_sim/tenants", add_tenant, methods=["POST"]),
            Route("/_sim/tenants/{name}/counters", tenant_counters, methods=["GET"]),
        ]
    )
    app.state.sim = state
    raw = _KeepRawSend(app, state, models, tenants)
    return raw


class _Server(uvicorn.Server):
    def __init__(self, config: uvicorn.Config, on_ready: Callable[[], None]) -> None:
        super().__init__(config)
        self._on_ready = on_ready

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets=sockets)
        if not self.should_exit:
            self._on_ready()


def parse_profile_options(options: Mapping[str, Any] | str | None) -> Mapping[str, Any] | None:
    """Profile options given as a mapping, as JSON text, or not at all."""
    if options is None or isinstance(options, Mapping):
        return options
    try:
        parsed = json.loads(options) if options.strip() else None
    except ValueError as exc:
        raise ProfileError(f"profile options are not valid JSON: {exc}") from exc
    if parsed is not None and not isinstance(parsed, dict):
        raise ProfileError("profile options must be a JSON object keyed by profile")
    return parsed


def _url(host: str, port: int) -> str:
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


def bind_socket(host: str, port: int) -> socket.socket:
    """A listening socket on ``host:port``; a bad host or port, or one in use, raises
    SimError saying which and why (not an OSError from deep inside)."""
    if not 0 <= port <= 65535:
        raise SimError(f"port {port} is out of range: use 0 (any free port) to 65535")
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
    except socket.gaierror as exc:
        sock.close()
        raise SimError(f"cannot listen on host {host!r}: not an address here ({exc})") from exc
    except OSError as exc:
        sock.close()
        reason = "the port is in use" if exc.errno == errno.EADDRINUSE else exc.strerror
        raise SimError(f"cannot listen on {host}:{port}: {reason}") from exc
    return sock


def _exit_with_parent(server: uvicorn.Server, parent_pid: int) -> None:
    """Stop the server once the process that started it is gone (killed without cleanup),
    so a crashed run leaves no provider serving (and billing) behind."""
    while not server.should_exit:
        if os.getppid() != parent_pid:
            print("sim: parent process gone; stopping", file=sys.stderr, flush=True)
            server.should_exit = True
            return
        time.sleep(_PARENT_POLL_S)


def serve(
    host: str = "127.0.0.1",
    port: int = 0,
    seed: int = 0,
    latency_ms: float = 0.0,
    profile_options: Mapping[str, Any] | str | None = None,
    *,
    plugins: Sequence[str] = (),
    ready_stream: TextIO | None = None,
    request_log: str | None = None,
    parent_pid: int | None = None,
) -> None:
    """Serve until SIGINT/SIGTERM (or until ``parent_pid`` is gone); print
    ``SIM LISTENING <url>`` once ready.

    ``profile_options`` is a mapping keyed by profile (or ``profile:variant``) or the same
    as JSON text. ``port=0`` picks a free port (the printed URL has the real one). Profile
    errors (unknown plugin, invalid options) and a host or port that cannot be listened
    on raise :class:`SimError` before anything listens. ``request_log`` appends every
    model request to that JSON-lines file.
    """
    app = build_app(
        SimConfig(
            seed=seed,
            latency_ms=latency_ms,
            profile_options=parse_profile_options(profile_options),
            plugins=plugins,
            request_log=request_log,
        )
    )
    try:
        sock = bind_socket(host, port)
        bound_port = int(sock.getsockname()[1])
        stream = ready_stream if ready_stream is not None else sys.stdout
        loop: Literal["uvloop", "asyncio"] = "uvloop"
        config = uvicorn.Config(
            app,
            loop=loop,
            http="httptools",
            ws="none",
            lifespan="off",
            access_log=False,
            log_level="warning",
            server_header=False,
            proxy_headers=False,
            timeout_graceful_shutdown=2,
            # Longer than any client pool's keep-alive expiry, so the client closes idle
            # connections first and never reuses one the server is closing (a spurious drop).
            timeout_keep_alive=120,
            backlog=4096,
        )

        def announce() -> None:
            print(LISTENING_PREFIX + _url(host, bound_port), file=stream, flush=True)

        server = _Server(config, announce)
        if parent_pid is not None:
            threading.Thread(
                target=_exit_with_parent, args=(server, parent_pid), daemon=True
            ).start()
        server.run(sockets=[sock])
    finally:
        app.close()
