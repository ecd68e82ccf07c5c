"""Shared pieces of the simulated provider's tests."""

from __future__ import annotations

from typing import Any

import httpx

from eval_pipeline.sim.process import SimHandle, SimTenant

FAKE_KEY = "sk-evalp-sim-test-FAKE-KEY-7c1e0b9a55d34f21"
LOOKUP_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "query": {"type": "string", "minLength": 3},
        "limit": {"type": "integer", "minimum": 1, "maximum": 5},
        "kind": {"type": "string", "enum": ["artist", "track", "release"]},
        "note": {"type": "string"},
    },
    "required": ["query", "limit", "kind"],
    "additionalProperties": False,
}
OPENAI_TOOLS: list[dict[str, Any]] = [
    {
        "type": "function",
        "function": {
            "name": "lookup",
            "description": "Look a record up.",
            "parameters": LOOKUP_SCHEMA,
        },
    }
]
ANTHROPIC_TOOLS: list[dict[str, Any]] = [
    {"name": "lookup", "description": "Look a record up.", "input_schema": LOOKUP_SCHEMA}
]
AGENT_FORBIDDEN_MODULES = (
    "eval_pipeline.world",
    "eval_pipeline.lanes",
    "eval_pipeline.paths",
    "eval_pipeline.warehouse",
    "duckdb",
    "polars",
)
"""Modules the simulated agents may not load: the world, the lanes, where things live on
disk, the warehouse, and the libraries that read tables."""
PLANTED_LOOKUP = {
    "type": "object",
    "properties": {"query": {"type": "string"}},
    "required": ["query"],
}


def planted_body(wire: str, n: int, max_tokens: int = 64) -> dict[str, Any]:
    """A planted request as the harness sends it (requests 8..15 offer ``lookup``)."""
    body: dict[str, Any] = {
        "model": "planted",
        "max_tokens": max_tokens,
        "messages": [{"role": "user", "content": f"What is owed? PLANTED-{n}"}],
    }
    if 8 <= n < 16:
        if wire == "openai":
            body["tools"] = [
                {"type": "function", "function": {"name": "lookup", "parameters": PLANTED_LOOKUP}}
            ]
        else:
            body["tools"] = [{"name": "lookup", "input_schema": PLANTED_LOOKUP}]
    return body


def post(
    sim: SimHandle | SimTenant,
    wire: str,
    body: dict[str, Any],
    headers: dict[str, str] | None = None,
) -> httpx.Response:
    """POST a raw body to the model endpoint of ``wire`` (with the fake key, as SDKs would)."""
    path = "/v1/chat/completions" if wire == "openai" else "/v1/messages"
    auth = (
        {"authorization": f"Bearer {FAKE_KEY}"}
        if wire == "openai"
        else {"x-api-key": FAKE_KEY, "anthropic-version": "2023-06-01"}
    )
    return _client().post(sim.base_url + path, json=body, headers={**auth, **(headers or {})})


_CLIENTS: list[httpx.Client] = []


def _client() -> httpx.Client:
    """One plain client for all raw posts (building one per call costs ~50 ms of TLS setup)."""
    if not _CLIENTS:
        _CLIENTS.append(httpx.Client(timeout=10.0, trust_env=False))
    return _CLIENTS[0]


def close_clients() -> None:
    """Close the shared raw client (its pooled sockets outlive the servers otherwise)."""
    while _CLIENTS:
        _CLIENTS.pop().close()
