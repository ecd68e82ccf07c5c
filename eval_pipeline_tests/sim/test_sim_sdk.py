"""The official SDKs, unmodified, against the simulated provider over real HTTP."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Iterator
from datetime import date
from decimal import Decimal
from typing import Any

import anthropic
import httpx
import openai
import pytest

from eval_pipeline.cases.schema_check import schema_problem
from eval_pipeline.project_configs import load_price_book
from eval_pipeline.sim.process import SimHandle, running_sim
from eval_pipeline.sim.tokens import schema_text, text_tokens
from eval_pipeline_tests.sim.helpers import (
    ANTHROPIC_TOOLS,
    FAKE_KEY,
    LOOKUP_SCHEMA,
    OPENAI_TOOLS,
    post,
)

OPTIONS: dict[str, Any] = {
    "planted": {"retry_after_s": 2, "retry_after_ms": 7},
    "flaky:once": {
        "drop": 0,
        "rate_limit": 1.0,
        "server_error": 0,
        "empty_body": 0,
        "malformed_json": 0,
        "truncated": 0,
        "retry_after_s": 1,
        "retry_after_ms": 5,
        "max_faults_per_request": 1,
    },
}
TOOL_RESULT = "  Royalty due: 1,234.56 USD  \nsecond line"
EXPECTED_ANSWER = "ANSWER: Royalty due: 1,234.56 USD"


@pytest.fixture(scope="module")
def sim() -> Iterator[SimHandle]:
    with running_sim(seed=11, profile_options=OPTIONS) as handle:
        yield handle


@pytest.fixture
def oai(sim: SimHandle) -> Iterator[Any]:
    with openai.OpenAI(
        base_url=sim.openai_base_url, api_key=FAKE_KEY, max_retries=0, timeout=10.0
    ) as client:
        yield client


@pytest.fixture
def ant(sim: SimHandle) -> Iterator[Any]:
    with anthropic.Anthropic(
        base_url=sim.anthropic_base_url, api_key=FAKE_KEY, max_retries=0, timeout=10.0
    ) as client:
        yield client


def _openai_turns(first: Any) -> list[dict[str, Any]]:
    call = first.choices[0].message.tool_calls[0]
    return [
        {"role": "user", "content": "Find the royalty due to ART-0001"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": call.id,
                    "type": "function",
                    "function": {"name": call.function.name, "arguments": call.function.arguments},
                }
            ],
        },
        {"role": "tool", "tool_call_id": call.id, "content": TOOL_RESULT},
    ]


def _check_openai_tool_call(first: Any) -> None:
    choice = first.choices[0]
    assert choice.finish_reason == "tool_calls"
    assert choice.message.content is None
    (call,) = choice.message.tool_calls
    assert call.type == "function"
    assert call.function.name == "lookup"
    assert call.id.startswith("call_")
    assert schema_problem(json.loads(call.function.arguments), LOOKUP_SCHEMA) is None
    usage = first.usage
    assert usage.prompt_tokens > 0 and usage.completion_tokens > 0
    assert usage.total_tokens == usage.prompt_tokens + usage.completion_tokens


def _check_openai_answer(second: Any) -> None:
    choice = second.choices[0]
    assert choice.finish_reason == "stop"
    assert choice.message.tool_calls is None
    assert choice.message.content.splitlines()[-1] == EXPECTED_ANSWER
    assert second.usage.completion_tokens > 0


def test_openai_sync_tool_conversation(oai: Any) -> None:
    first = oai.chat.completions.create(
        model="tool-responder",
        messages=[{"role": "user", "content": "Find the royalty due to ART-0001"}],
        tools=OPENAI_TOOLS,
        max_tokens=200,
    )
    _check_openai_tool_call(first)
    second = oai.chat.completions.create(
        model="tool-responder",
        messages=_openai_turns(first),
        tools=OPENAI_TOOLS,
        max_tokens=200,
    )
    _check_openai_answer(second)
    assert second.usage is not None and first.usage is not None
    assert second.usage.prompt_tokens > first.usage.prompt_tokens


def test_openai_async_tool_conversation(sim: SimHandle) -> None:
    async def converse() -> tuple[Any, Any]:
        client: Any = openai.AsyncOpenAI(
            base_url=sim.openai_base_url, api_key=FAKE_KEY, max_retries=0, timeout=10.0
        )
        async with client:
            first = await client.chat.completions.create(
                model="tool-responder",
                messages=[{"role": "user", "content": "Find the royalty due to ART-0001"}],
                tools=OPENAI_TOOLS,
                max_completion_tokens=200,
            )
            second = await client.chat.completions.create(
                model="tool-responder",
                messages=_openai_turns(first),
                tools=OPENAI_TOOLS,
                max_completion_tokens=200,
            )
            return first, second

    first, second = asyncio.run(converse())
    _check_openai_tool_call(first)
    _check_openai_answer(second)


def test_anthropic_tool_conversation(ant: Any) -> None:
    user = {"role": "user", "content": "Find the royalty due to ART-0001"}
    first = ant.messages.create(
        model="tool-responder",
        max_tokens=200,
        messages=[user],
        tools=ANTHROPIC_TOOLS,
    )
    assert first.stop_reason == "tool_use"
    (block,) = first.content
    assert block.type == "tool_use"
    assert block.name == "lookup" and block.id.startswith("toolu_")
    assert isinstance(block.input, dict)
    assert schema_problem(block.input, LOOKUP_SCHEMA) is None
    assert first.usage.input_tokens > 0 and first.usage.output_tokens > 0
    second = ant.messages.create(
        model="tool-responder",
        max_tokens=200,
        messages=[
            user,
            {
                "role": "assistant",
                "content": [
                    {"type": "tool_use", "id": block.id, "name": block.name, "input": block.input}
                ],
            },
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": block.id,
                        "content": [{"type": "text", "text": TOOL_RESULT}],
                    }
                ],
            },
        ],
        tools=ANTHROPIC_TOOLS,
    )
    assert second.stop_reason == "end_turn"
    text = "".join(b.text for b in second.content if b.type == "text")
    assert text.splitlines()[-1] == EXPECTED_ANSWER
    assert second.usage.input_tokens > first.usage.input_tokens


def test_without_tools_the_answer_is_the_last_word(oai: Any, ant: Any) -> None:
    reply = oai.chat.completions.create(
        model="tool-responder",
        messages=[
            {"role": "system", "content": "Answer briefly."},
            {"role": "user", "content": "The number is 42."},
        ],
    )
    assert reply.choices[0].message.content == "ANSWER: 42"
    assert reply.choices[0].finish_reason == "stop"
    message = ant.messages.create(
        model="tool-responder",
        max_tokens=50,
        system="Answer briefly.",
        messages=[{"role": "user", "content": "Say hello world"}],
    )
    assert [b.text for b in message.content if b.type == "text"] == ["ANSWER: world"]


def test_tool_choice_none_and_forced(oai: Any) -> None:
    second_tool = {
        "type": "function",
        "function": {"name": "calc", "parameters": {"type": "object", "properties": {}}},
    }
    none = oai.chat.completions.create(
        model="tool-responder",
        messages=[{"role": "user", "content": "no tools please"}],
        tools=OPENAI_TOOLS,
        tool_choice="none",
    )
    assert none.choices[0].message.content == "ANSWER: please"
    for name in ("calc", "lookup"):
        forced = oai.chat.completions.create(
            model="tool-responder",
            messages=[{"role": "user", "content": "use it"}],
            tools=[*OPENAI_TOOLS, second_tool],
            tool_choice={"type": "function", "function": {"name": name}},
        )
        calls = forced.choices[0].message.tool_calls
        assert calls is not None and calls[0].function.name == name


def test_token_counts_follow_the_documented_rule_in_both_formats(sim: SimHandle) -> None:
    text = "Find the royalty due to ART-0001"
    schema_tokens = text_tokens(schema_text(LOOKUP_SCHEMA))
    expected_in = (
        3 + (4 + text_tokens(text)) + (4 + 2 + text_tokens("Look a record up.") + schema_tokens)
    )
    assert text_tokens(text) == 8 and text_tokens("") == 0 and text_tokens("é") == 1
    oa = post(
        sim,
        "openai",
        {
            "model": "tool-responder",
            "messages": [{"role": "user", "content": text}],
            "tools": OPENAI_TOOLS,
        },
    ).json()
    an = post(
        sim,
        "anthropic",
        {
            "model": "tool-responder",
            "max_tokens": 100,
            "tools": ANTHROPIC_TOOLS,
            "messages": [{"role": "user", "content": [{"type": "text", "text": text}]}],
        },
    ).json()
    assert oa["usage"]["prompt_tokens"] == an["usage"]["input_tokens"] == expected_in
    arguments = oa["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"]
    assert oa["usage"]["completion_tokens"] == 1 + 4 + text_tokens("lookup") + text_tokens(
        arguments
    )
    again = post(
        sim,
        "openai",
        {
            "model": "tool-responder",
            "messages": [{"role": "user", "content": text}],
            "tools": OPENAI_TOOLS,
        },
    ).json()
    assert again["usage"] == oa["usage"]


def test_a_long_reply_is_cut_at_max_tokens(oai: Any) -> None:
    long_result = "x" * 400
    reply = oai.chat.completions.create(
        model="tool-responder",
        messages=[
            {"role": "user", "content": "go"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "call_1",
                        "type": "function",
                        "function": {"name": "lookup", "arguments": "{}"},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "call_1", "content": long_result},
        ],
        max_tokens=5,
    )
    assert reply.choices[0].finish_reason == "length"
    assert reply.usage is not None and reply.usage.completion_tokens == 5
    content = reply.choices[0].message.content
    assert content is not None and len(content) <= 16 and "ANSWER" not in content


SDK_KINDS = ["openai", "anthropic"]


def _call(sim: SimHandle, kind: str, model: str, text: str) -> Any:
    if kind == "openai":
        client: Any = openai.OpenAI(
            base_url=sim.openai_base_url, api_key=FAKE_KEY, max_retries=0, timeout=10.0
        )
        with client:
            return client.chat.completions.create(
                model=model, messages=[{"role": "user", "content": text}], max_tokens=50
            )
    other: Any = anthropic.Anthropic(
        base_url=sim.anthropic_base_url, api_key=FAKE_KEY, max_retries=0, timeout=10.0
    )
    with other:
        return other.messages.create(
            model=model, max_tokens=50, messages=[{"role": "user", "content": text}]
        )


@pytest.mark.parametrize("kind", SDK_KINDS)
def test_error_statuses_surface_as_typed_sdk_errors(sim: SimHandle, kind: str) -> None:
    sdk: Any = openai if kind == "openai" else anthropic
    with pytest.raises(sdk.RateLimitError) as limited:
        _call(sim, kind, "planted", "PLANTED-1")
    assert limited.value.status_code == 429
    assert limited.value.response.headers["retry-after"] == "2"
    assert limited.value.response.headers["retry-after-ms"] == "7"
    with pytest.raises(sdk.InternalServerError) as overloaded:
        _call(sim, kind, "planted", "PLANTED-0")
    assert overloaded.value.status_code == 503
    with pytest.raises(sdk.InternalServerError) as failed:
        _call(sim, kind, "planted", "PLANTED-2")
    assert failed.value.status_code == 500
    with pytest.raises(sdk.APIConnectionError):
        _call(sim, kind, "planted", "PLANTED-3")
    with pytest.raises(sdk.NotFoundError) as missing:
        _call(sim, kind, "no-such-profile", "hello")
    with pytest.raises(sdk.NotFoundError):
        _call(sim, kind, "tool-responder:no-such-variant", "hello")
    body = missing.value.body
    if kind == "openai":
        assert body["code"] == "model_not_found"
        assert body["type"] == "invalid_request_error"
        assert "no-such-profile" in body["message"]
        assert limited.value.body["code"] == "rate_limit_exceeded"
    else:
        assert body["type"] == "error"
        assert body["error"]["type"] == "not_found_error"
        assert limited.value.body["error"]["type"] == "rate_limit_error"
        assert overloaded.value.body["error"]["type"] == "overloaded_error"
        assert failed.value.body["error"]["type"] == "api_error"


def test_malformed_requests_get_provider_shaped_400s(sim: SimHandle) -> None:
    missing_max = post(
        sim,
        "anthropic",
        {"model": "tool-responder", "messages": [{"role": "user", "content": "x"}]},
    )
    assert missing_max.status_code == 400
    assert missing_max.json()["error"] == {
        "type": "invalid_request_error",
        "message": "max_tokens: Field required",
    }
    streamed = post(
        sim,
        "openai",
        {"model": "tool-responder", "stream": True, "messages": [{"role": "user", "content": "x"}]},
    )
    assert streamed.status_code == 400
    assert streamed.json()["error"]["type"] == "invalid_request_error"
    not_json = httpx.post(sim.openai_base_url + "/chat/completions", content=b"{nope", timeout=5)
    assert not_json.status_code == 400 and "error" in not_json.json()
    untagged = post(
        sim, "openai", {"model": "planted", "messages": [{"role": "user", "content": "hi"}]}
    )
    assert untagged.status_code == 400


def test_flaky_fails_a_request_then_serves_its_retry(sim: SimHandle) -> None:
    body = {"model": "flaky:once", "messages": [{"role": "user", "content": "retry me 7"}]}
    first = post(sim, "openai", body)
    assert first.status_code == 429
    assert first.headers["retry-after"] == "1" and first.headers["retry-after-ms"] == "5"
    second = post(sim, "openai", body)
    assert second.status_code == 200
    assert second.json()["choices"][0]["message"]["content"] == "ANSWER: 7"
    assert post(sim, "openai", body).status_code == 200
    # Another replicate seed is another request: its first occurrence fails again.
    assert post(sim, "openai", body, headers={"x-evalp-seed": "5"}).status_code == 429
    assert post(sim, "openai", body, headers={"x-evalp-seed": "5"}).status_code == 200


def test_the_bill_sums_and_follows_the_clock(sim: SimHandle, oai: Any) -> None:
    sim.reset()
    sim.set_clock(date(2026, 12, 31))
    served = [
        oai.chat.completions.create(
            model="tool-responder", messages=[{"role": "user", "content": "bill one"}]
        ),
        oai.chat.completions.create(
            model="planted", messages=[{"role": "user", "content": "PLANTED-21"}]
        ),
    ]
    with pytest.raises(openai.InternalServerError):
        oai.chat.completions.create(
            model="planted", messages=[{"role": "user", "content": "PLANTED-0"}]
        )
    assert (
        post(
            sim,
            "openai",
            {"model": "planted", "messages": [{"role": "user", "content": "PLANTED-6"}]},
        ).content
        == b""
    )
    sim.set_clock(date(2027, 1, 2))
    anthropic_reply = post(
        sim,
        "anthropic",
        {"model": "flaky:once", "max_tokens": 30, "messages": [{"role": "user", "content": "b"}]},
    )
    assert anthropic_reply.status_code == 429  # a fault: not billed
    anthropic_reply = post(
        sim,
        "anthropic",
        {"model": "flaky:once", "max_tokens": 30, "messages": [{"role": "user", "content": "b"}]},
    )
    assert anthropic_reply.status_code == 200
    sim.set_clock(None)

    assert sim.request_count() == 6
    lines = sim.bill()
    assert [line.request_id for line in lines] == [
        *(reply.id for reply in served),
        anthropic_reply.json()["id"],
    ]
    assert [line.day for line in lines] == [date(2026, 12, 31)] * 2 + [date(2027, 1, 2)]
    assert [line.wire_format for line in lines] == ["openai", "openai", "anthropic"]
    assert [line.model for line in lines] == ["tool-responder", "planted", "flaky:once"]
    assert [line.tier_id for line in lines] == ["sim-intro", "sim-intro", "sim-sticker"]
    for line, reply in zip(lines, served, strict=False):
        assert reply.usage is not None
        assert (line.input_tokens, line.output_tokens) == (
            reply.usage.prompt_tokens,
            reply.usage.completion_tokens,
        )
    book = load_price_book()
    expected = [
        book.quote(line.model, line.day, line.input_tokens, line.output_tokens).cost_usd
        for line in lines
    ]
    assert [Decimal(line.cost_usd) for line in lines] == expected
    assert sum(Decimal(line.cost_usd) for line in lines) == sum(expected)
    assert [u.request_id for u in sim.usage()] == [line.request_id for line in lines]
    counters = sim.counters()
    assert counters["billed"] == 3
    assert counters["outcomes"] == {"Reply": 3, "ErrorStatus": 2, "RawBody": 1}
    sim.reset()
    assert sim.bill() == [] and sim.request_count() == 0


def test_no_request_header_or_key_is_kept_or_written(sim: SimHandle) -> None:
    for kind in SDK_KINDS:
        for text in ("PLANTED-1", "PLANTED-3", "PLANTED-7", "PLANTED-20"):
            with contextlib.suppress(openai.APIError, anthropic.APIError, json.JSONDecodeError):
                _call(sim, kind, "planted", text)
        with pytest.raises((openai.NotFoundError, anthropic.NotFoundError)):
            _call(sim, kind, "unknown-model", "x")
    post(sim, "openai", {"model": "tool-responder", "messages": "bad"})
    written = [
        *sim.output(),
        httpx.get(sim.base_url + "/_sim/bill").text,
        httpx.get(sim.base_url + "/_sim/usage").text,
        httpx.get(sim.base_url + "/_sim/counters").text,
        httpx.get(sim.base_url + "/_sim/health").text,
    ]
    for text in written:
        assert FAKE_KEY not in text
        assert "authorization" not in text.lower()
    stdout, _stderr = sim.output()
    assert stdout.startswith("SIM LISTENING http://127.0.0.1:")
    assert len(stdout.splitlines()) == 1
