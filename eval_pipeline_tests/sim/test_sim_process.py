"""The server process: plugins, latency, start-up failures, and what a profile is handed."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import pytest

from eval_pipeline.sim.errors import SimError, SimStartupError
from eval_pipeline.sim.process import SimHandle, running_sim
from eval_pipeline.sim.server import PROFILE_ERROR_HEADER, PROFILE_ERROR_TYPE
from eval_pipeline_tests.sim.helpers import FAKE_KEY, post

LATENCY_MS = 150
PLUGIN = "eval_pipeline_tests.sim.echo_profile"
SCHEMA = {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}


@pytest.fixture(scope="module")
def sim() -> Iterator[SimHandle]:
    options = {"test-echo": {"prefix": "seen:"}, "test-echo:v2": {}}
    with running_sim(
        seed=9,
        latency_ms=LATENCY_MS,
        profile_options=options,
        plugins=[PLUGIN],
        allow_profile_errors=True,  # the echo profile crashes on purpose here
    ) as handle:
        yield handle


def _seen(response: Any) -> dict[str, Any]:
    assert response.status_code == 200, response.text
    body = response.json()
    text = (
        body["choices"][0]["message"]["content"]
        if "choices" in body
        else body["content"][0]["text"]
    )
    assert text.startswith("seen:")
    seen: dict[str, Any] = json.loads(text[len("seen:") :])
    return seen


def test_a_plugin_profile_sees_the_same_neutral_request_from_both_formats(sim: SimHandle) -> None:
    openai_body = {
        "model": "test-echo:v2",
        "max_tokens": 4000,
        "temperature": 0.5,
        "seed": 3,
        "tool_choice": {"type": "function", "function": {"name": "find"}},
        "tools": [
            {
                "type": "function",
                "function": {"name": "find", "description": "d", "parameters": SCHEMA},
            }
        ],
        "messages": [
            {"role": "system", "content": "Be exact."},
            {"role": "user", "content": [{"type": "text", "text": "look"}]},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "c1",
                        "type": "function",
                        "function": {"name": "find", "arguments": '{"q": "a"}'},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "c1", "content": "found"},
        ],
    }
    anthropic_body = {
        "model": "test-echo:v2",
        "max_tokens": 4000,
        "temperature": 0.5,
        "system": [{"type": "text", "text": "Be exact."}],
        "tool_choice": {"type": "tool", "name": "find"},
        "tools": [{"name": "find", "description": "d", "input_schema": SCHEMA}],
        "messages": [
            {"role": "user", "content": "look"},
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": "c1", "name": "find", "input": {"q": "a"}}],
            },
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": "c1", "content": "found"}],
            },
        ],
    }
    started = time.monotonic()
    from_openai = _seen(post(sim, "openai", openai_body))
    assert time.monotonic() - started >= LATENCY_MS / 1000
    from_anthropic = _seen(post(sim, "anthropic", anthropic_body, {"x-evalp-seed": "3"}))
    assert from_openai.pop("wire") == "openai"
    assert from_anthropic.pop("wire") == "anthropic"
    assert from_openai == from_anthropic
    assert from_openai == {
        "profile": "test-echo",
        "variant": "v2",
        "system": "Be exact.",
        "messages": [
            {"role": "user", "text": "look", "calls": [], "results": []},
            {
                "role": "assistant",
                "text": "",
                "calls": [["find", '{"q": "a"}', "c1"]],
                "results": [],
            },
            {"role": "user", "text": "", "calls": [], "results": [["c1", "found", False]]},
        ],
        "tools": [["find", "d", SCHEMA]],
        "tool_choice": ["tool", "find"],
        "max_tokens": 4000,
        "temperature": 0.5,
        "replicate_seed": 3,
        "occurrence": 0,
        "server_seed": 9,
    }
    again = _seen(post(sim, "openai", openai_body))
    assert again["occurrence"] == 1


def test_unknown_variant_is_404_and_a_crashing_profile_is_a_marked_500_counted_apart(
    sim: SimHandle,
) -> None:
    """A bug in a profile must not pass for a planted 5xx: its own counter and marker."""
    body = {"model": "test-echo:v3", "messages": [{"role": "user", "content": "x"}]}
    assert post(sim, "openai", body).status_code == 404
    before = sim.profile_errors()
    crash = {
        "model": "test-echo",
        "max_tokens": 10,
        "messages": [{"role": "user", "content": "crash"}],
    }
    response = post(sim, "anthropic", crash)
    assert response.status_code == 500
    assert response.json()["error"]["type"] == PROFILE_ERROR_TYPE
    assert response.headers[PROFILE_ERROR_HEADER] == "test-echo"
    junk = {"model": "test-echo", "messages": [{"role": "user", "content": "junk"}]}
    answered = post(sim, "openai", junk)
    assert answered.json()["error"]["type"] == PROFILE_ERROR_TYPE
    assert answered.headers[PROFILE_ERROR_HEADER] == "test-echo"
    counters = sim.counters()
    assert counters["profile_errors"] == before + 2
    assert counters["outcomes"].get("ProfileError", 0) >= 2
    assert "returned a str, not an outcome" in counters["last_profile_error"]
    sim.reset()  # a reset forgets the bill, not a simulator bug
    assert sim.profile_errors() == before + 2
    with pytest.raises(SimError, match="profiles failed"):
        sim.check_no_profile_errors()
    _stdout, stderr = sim.output()
    assert "echo profile crashed on purpose" in stderr
    assert "returned a str, not an outcome" in stderr
    assert FAKE_KEY not in stderr
    assert sim.health()["profiles"] == [
        "flaky",
        "judge",
        "planted",
        "sim-hesitant",
        "sim-no-tools",
        "sim-small",
        "sim-strong",
        "sim-tool-user",
        "test-echo",
        "tool-responder",
    ]


def test_a_profile_error_fails_the_running_sim_block_unless_allowed() -> None:
    crash = {
        "model": "test-echo",
        "max_tokens": 10,
        "messages": [{"role": "user", "content": "crash"}],
    }
    with pytest.raises(SimError, match="echo profile crashed on purpose"):  # noqa: SIM117
        with running_sim(plugins=[PLUGIN]) as handle:
            assert post(handle, "openai", crash).status_code == 500


def test_invalid_profile_options_fail_start_up_with_the_reason() -> None:
    with pytest.raises(SimStartupError, match=r"fault rates sum to 1\.75"):  # noqa: SIM117
        with running_sim(profile_options={"flaky": {"drop": 0.75, "rate_limit": 0.75}}):
            pass
    with pytest.raises(SimStartupError, match="unknown profile 'nope'"):  # noqa: SIM117
        with running_sim(profile_options={"nope": {}}):
            pass
