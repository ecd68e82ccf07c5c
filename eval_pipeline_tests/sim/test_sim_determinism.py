"""Same requests to fresh servers give the same answers (ids and timestamps aside)."""

from __future__ import annotations

from typing import Any

import httpx

from eval_pipeline.sim.process import SimHandle, running_sim
from eval_pipeline_tests.sim.helpers import ANTHROPIC_TOOLS, OPENAI_TOOLS, planted_body, post

FLAKY = {"flaky": {"retry_after_ms": 1}}


def _requests() -> list[tuple[str, dict[str, Any], dict[str, str]]]:
    requests: list[tuple[str, dict[str, Any], dict[str, str]]] = []
    for i in range(3):
        text = f"Find record {i}"
        requests.append(
            (
                "openai",
                {
                    "model": "tool-responder",
                    "tools": OPENAI_TOOLS,
                    "seed": i,
                    "messages": [{"role": "user", "content": text}],
                },
                {},
            )
        )
        requests.append(
            (
                "anthropic",
                {
                    "model": "tool-responder",
                    "tools": ANTHROPIC_TOOLS,
                    "max_tokens": 99,
                    "messages": [{"role": "user", "content": text}],
                },
                {"x-evalp-seed": str(i)},
            )
        )
    for n in (4, 11, 15, 19, 22):
        requests.append(("openai", planted_body("openai", n), {}))
        requests.append(("anthropic", planted_body("anthropic", n), {}))
    for i in range(24):
        wire = "openai" if i % 2 else "anthropic"
        body = {
            "model": "flaky",
            "max_tokens": 40,
            "tools": OPENAI_TOOLS if wire == "openai" else ANTHROPIC_TOOLS,
            "messages": [{"role": "user", "content": f"flaky {i}"}],
        }
        requests.append((wire, body, {}))
        requests.append((wire, body, {}))  # its retry: a second occurrence
    return requests


def _observe(
    sim: SimHandle, requests: list[tuple[str, dict[str, Any], dict[str, str]]]
) -> list[Any]:
    seen: list[Any] = []
    for wire, body, headers in requests:
        try:
            response = post(sim, wire, body, headers)
        except httpx.RemoteProtocolError:
            seen.append("drop")
            continue
        try:
            payload = response.json()
        except ValueError:
            seen.append((response.status_code, response.content))
            continue
        if isinstance(payload, dict):
            for key in ("id", "created", "request_id"):
                payload.pop(key, None)
        seen.append((response.status_code, payload))
    return seen


def test_fresh_servers_answer_identically() -> None:
    requests = _requests()
    with running_sim(seed=21, profile_options=FLAKY) as first:
        one = _observe(first, requests)
    with running_sim(seed=21, profile_options=FLAKY) as second:
        two = _observe(second, requests)
        two_again = _observe(second, requests[:16])  # same server, later occurrences
    assert one == two
    # tool-responder and planted answer the same on every occurrence
    assert two_again == two[:16]
    flaky = one[16:]
    kinds = {"drop" if o == "drop" else o[0] for o in flaky}
    assert 200 in kinds and len(kinds) >= 3  # a mix of faults and replies
    retries_differ = sum(flaky[i] != flaky[i + 1] for i in range(0, len(flaky), 2))
    assert retries_differ > 0  # the occurrence count is part of the draw

    with running_sim(seed=22, profile_options=FLAKY) as other_seed:
        three = _observe(other_seed, requests[16:])
    assert three != flaky
