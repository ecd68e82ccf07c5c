"""The model endpoints answer the same through the server's shortcut as through Starlette.

`_KeepRawSend` sends an exact `POST /v1/chat/completions` or `POST /v1/messages` straight
to its endpoint (under Starlette's 500 handler), past the router and exception layers.
Two servers of one seed, run id and clock answer the same requests — replies in both
wire formats, planted faults, an unknown model, a body that is not JSON, tool offers —
one through the shortcut and one through the full Starlette application: the ASGI
messages sent are the same, byte for byte. A bug in an endpoint gets the same 500 both
ways and is raised to the server both ways. Other methods and paths still reach the
application (405, 404, a trailing slash's redirect).
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from eval_pipeline.sim import server as sim_server
from eval_pipeline.sim.server import SimConfig, build_app

Message = dict[str, Any]
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "lookup",
            "description": "find",
            "parameters": {
                "type": "object",
                "properties": {"query": {"type": "string"}},
                "required": ["query"],
            },
        },
    }
]
REQUESTS: list[tuple[str, bytes, list[tuple[bytes, bytes]]]] = [
    (
        "/v1/chat/completions",
        json.dumps(
            {
                "model": "tool-responder",
                "messages": [{"role": "user", "content": "say royalties7"}],
                "max_tokens": 16,
                "seed": 7,
            }
        ).encode(),
        [],
    ),
    (
        "/v1/chat/completions",
        json.dumps(
            {
                "model": "tool-responder",
                "messages": [{"role": "user", "content": "look it up"}],
                "tools": TOOLS,
                "max_tokens": 64,
            }
        ).encode(),
        [(b"x-evalp-seed", b"3")],
    ),
    (
        "/v1/messages",
        json.dumps(
            {
                "model": "tool-responder",
                "max_tokens": 16,
                "system": "be brief",
                "messages": [{"role": "user", "content": "say Björk — 東京"}],
            }
        ).encode(),
        [],
    ),
    *(
        (
            path,
            json.dumps(
                {
                    "model": "planted",
                    "max_tokens": 32,
                    "messages": [{"role": "user", "content": f"case PLANTED-{n}"}],
                }
            ).encode(),
            [],
        )
        for n in (0, 1, 2, 4, 6, 7, 8, 20, 23)
        for path in ("/v1/chat/completions", "/v1/messages")
    ),
    ("/v1/chat/completions", b'{"model": "no-such-model", "messages": []}', []),
    ("/v1/messages", b"not json", []),
    ("/v1/chat/completions", b'{"model": "tool-responder", "stream": true}', []),
]


def _servers() -> tuple[Any, Any]:
    """Two servers alike (seed, run id) without latency."""
    first = build_app(SimConfig(seed=7))
    second = build_app(SimConfig(seed=7))
    second.state._run = first.state._run
    return first, second


def _scope(method: str, path: str, headers: list[tuple[bytes, bytes]]) -> dict[str, Any]:
    return {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "root_path": "",
        "query_string": b"",
        "headers": [(b"content-type", b"application/json"), *headers],
        "client": ("127.0.0.1", 5000),
        "server": ("127.0.0.1", 8000),
    }


async def _answer(app: Any, method: str, path: str, body: bytes, headers: Any) -> list[Message]:
    sent: list[Message] = []
    done = False

    async def receive() -> Message:
        nonlocal done
        if done:
            await asyncio.sleep(3600)  # a client that waits (a dropped connection's wait)
        done = True
        return {"type": "http.request", "body": body, "more_body": False}

    async def send(message: Message) -> None:
        sent.append(message)

    await app(_scope(method, path, headers), receive, send)
    return sent


def _both(method: str, path: str, body: bytes, headers: Any) -> tuple[list[Message], ...]:
    shortcut, full = _servers()

    async def run() -> tuple[list[Message], list[Message]]:
        return (
            await _answer(shortcut, method, path, body, headers),
            await _answer(full.app, method, path, body, headers),
        )

    return asyncio.run(run())


@pytest.fixture(autouse=True)
def _fixed_clock(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sim_server.time, "time", lambda: 1_796_139_006.0)


@pytest.mark.parametrize(("path", "body", "headers"), REQUESTS)
def test_a_model_request_gets_the_same_messages_either_way(
    path: str, body: bytes, headers: list[tuple[bytes, bytes]]
) -> None:
    ours, starlette = _both("POST", path, body, headers)
    assert ours == starlette
    assert ours[0]["type"] == "http.response.start"


@pytest.mark.parametrize(
    ("method", "path", "status"),
    [
        ("GET", "/v1/chat/completions", 405),
        ("POST", "/v1/chat/completions/", 307),
        ("POST", "/v1/other", 404),
        ("GET", "/_sim/health", 200),
    ],
)
def test_other_requests_still_reach_the_application(method: str, path: str, status: int) -> None:
    ours, starlette = _both(method, path, b"", [])
    assert ours == starlette
    assert ours[0]["status"] == status


def test_an_endpoint_bug_gets_the_same_500_and_is_raised_either_way(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def broken(*_args: object) -> None:
        raise RuntimeError("endpoint bug")

    monkeypatch.setattr(sim_server.SimState, "handle", broken)
    answers = []
    for app in _servers()[0], _servers()[1].app:
        sent: list[Message] = []

        async def receive() -> Message:
            return {"type": "http.request", "body": b"{}", "more_body": False}

        async def send(message: Message, into: list[Message] = sent) -> None:
            into.append(message)

        with pytest.raises(RuntimeError, match="endpoint bug"):
            asyncio.run(app(_scope("POST", "/v1/messages", []), receive, send))
        answers.append(sent)
    assert answers[0] == answers[1]
    assert answers[0][0]["status"] == 500
