"""Unit tests: wire translation, label precedence, schema check, configs, progress."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from eval_pipeline.cases.schema_check import schema_problem
from eval_pipeline.errors import ConfigError
from eval_pipeline.project_configs import scan_model_configs
from eval_pipeline.providers.config import ModelConfig, load_model_config
from eval_pipeline.providers.errors import MissingApiKeyError
from eval_pipeline.providers.harness import CallTag
from eval_pipeline.providers.labels import (
    LABELS,
    GradeInput,
    classify,
    expect_answer,
    expect_tool_call,
    extract_answer,
)
from eval_pipeline.providers.types import (
    Message,
    ModelRequest,
    ModelResponse,
    ToolCall,
    ToolSpec,
)
from eval_pipeline.providers.wire import (
    anthropic_body,
    openai_body,
    parse_anthropic_body,
    parse_openai_body,
)
from eval_pipeline.sim.process import SimHandle
from eval_pipeline_tests.providers.conftest import LOOKUP, new_session, sim_config

CONVERSATION = ModelRequest(
    messages=(
        Message(role="system", content="Be exact."),
        Message(role="user", content="Find ART-0001"),
        Message(
            role="assistant",
            content="Looking.",
            tool_calls=(ToolCall(id="t1", name="lookup", arguments='{"query": "ART-0001"}'),),
        ),
        Message(role="tool", tool_call_id="t1", content="found"),
        Message(role="user", content="And then?"),
    ),
    tools=(LOOKUP,),
    tool_choice="lookup",
    max_tokens=100,
    temperature=0.2,
    stop=("END",),
    seed=4,
)


def test_openai_body_shape() -> None:
    body = openai_body(CONVERSATION)
    assert [m["role"] for m in body["messages"]] == ["system", "user", "assistant", "tool", "user"]
    assert body["messages"][2]["tool_calls"][0]["function"] == {
        "name": "lookup",
        "arguments": '{"query": "ART-0001"}',
    }
    assert body["tool_choice"] == {"type": "function", "function": {"name": "lookup"}}
    assert body["tools"][0]["function"]["parameters"] == LOOKUP.input_schema
    assert (body["max_tokens"], body["seed"], body["stop"]) == (100, 4, ["END"])
    assert "max_completion_tokens" in openai_body(CONVERSATION, "max_completion_tokens")


def test_anthropic_body_shape() -> None:
    body = anthropic_body(CONVERSATION)
    assert body["system"] == "Be exact."
    assert [m["role"] for m in body["messages"]] == ["user", "assistant", "user"]
    assistant = body["messages"][1]["content"]
    assert assistant[1] == {
        "type": "tool_use",
        "id": "t1",
        "name": "lookup",
        "input": {"query": "ART-0001"},
    }
    merged = body["messages"][2]["content"]
    assert merged[0]["type"] == "tool_result" and merged[1] == {"type": "text", "text": "And then?"}
    assert body["tool_choice"] == {"type": "tool", "name": "lookup"}
    assert body["stop_sequences"] == ["END"] and "seed" not in body


@pytest.mark.parametrize(
    ("body", "problem"),
    [
        ("", "empty_body"),
        ("   ", "empty_body"),
        ("{nope", "malformed_json"),
        ("[1, 2]", "not_an_object"),
        ("{}", "no_choices"),
        ('{"choices": []}', "no_choices"),
        ('{"choices": [{"message": {"content": ""}, "finish_reason": "stop"}]}', "empty_reply"),
        ('{"choices": [{"message": {"content": null}, "finish_reason": "stop"}]}', "empty_reply"),
    ],
)
def test_openai_body_problems(body: str, problem: str) -> None:
    assert parse_openai_body(body).body_problem == problem


@pytest.mark.parametrize(
    ("body", "problem"),
    [
        ("", "empty_body"),
        ("{}", "no_content"),
        ('{"content": [], "stop_reason": "end_turn"}', "empty_reply"),
    ],
)
def test_anthropic_body_problems(body: str, problem: str) -> None:
    assert parse_anthropic_body(body).body_problem == problem


def test_parsed_replies() -> None:
    openai_reply = parse_openai_body(
        json.dumps(
            {
                "id": "x",
                "model": "m",
                "choices": [
                    {
                        "finish_reason": "tool_calls",
                        "message": {
                            "content": None,
                            "tool_calls": [
                                {"id": "c", "function": {"name": "lookup", "arguments": "{}"}}
                            ],
                        },
                    }
                ],
                "usage": {"prompt_tokens": 3, "completion_tokens": 4},
            }
        )
    )
    assert openai_reply.stop_kind == "tool_use" and openai_reply.tool_calls[0].name == "lookup"
    assert openai_reply.usage is not None and openai_reply.usage.output_tokens == 4
    anthropic_reply = parse_anthropic_body(
        json.dumps(
            {
                "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "ANSWER: 1"}],
                "stop_reason": "end_turn",
                "usage": {"input_tokens": 1, "output_tokens": 2},
            }
        )
    )
    assert anthropic_reply.text == "a\nANSWER: 1" and anthropic_reply.stop_kind == "end"


def test_answer_line_is_the_last_one() -> None:
    assert extract_answer("ANSWER: 40\nrecheck\nANSWER: 41") == "41"
    assert extract_answer("  ANSWER:   $1,234.50  ") == "$1,234.50"
    assert extract_answer("no answer here") is None
    assert extract_answer("ANSWER:") is None


def test_label_precedence() -> None:
    tools = (LOOKUP,)
    right = expect_answer("42")
    cut_empty = ModelResponse(text="", stop_kind="max_tokens", body_problem="empty_reply")
    assert classify("infra_error", cut_empty, failure_cause="5xx").label == "drop"
    # It ran out of tokens before any visible text: truncated, not empty.
    assert classify("ok", cut_empty, grader=right).label == "truncated"
    assert classify("ok", cut_empty.model_copy(update={"stop_kind": "end"})).label == "empty"
    bad_call_cut = ModelResponse(
        tool_calls=(ToolCall(id="1", name="nope", arguments="{"),), stop_kind="max_tokens"
    )
    assert classify("ok", bad_call_cut, tools).label == "truncated"
    bad_call = bad_call_cut.model_copy(update={"stop_kind": "tool_use"})
    assert classify("ok", bad_call, tools, grader=right).label == "schema"
    answered = ModelResponse(text="ANSWER: 42", stop_kind="end")
    assert classify("ok", answered, grader=right).label == "right"
    assert classify("ok", answered, grader=expect_answer("41")).label == "wrong"
    assert classify("ok", answered).label is None  # well-formed, not graded
    assert classify("harness_error", None).label is None
    assert classify("budget_stopped", None).label is None
    assert LABELS == ("drop", "empty", "truncated", "schema", "wrong", "right")


def test_tool_call_grader_matches_structure_not_text() -> None:
    call = ToolCall(id="1", name="lookup", arguments='{ "query" : "ART-0001" }')
    response = ModelResponse(tool_calls=(call,), stop_kind="tool_use")
    grader = expect_tool_call("lookup", {"query": "ART-0001"})
    assert classify("ok", response, (LOOKUP,), grader=grader).label == "right"
    other = expect_tool_call("lookup", {"query": "ART-0002"})
    assert classify("ok", response, (LOOKUP,), grader=other).label == "wrong"


@pytest.mark.parametrize(
    ("value", "schema", "ok"),
    [
        ({"q": "a"}, {"type": "object", "required": ["q"]}, True),
        ({}, {"type": "object", "required": ["q"]}, False),
        ({"q": 1}, {"properties": {"q": {"type": "string"}}}, False),
        ({"q": "x", "z": 1}, {"properties": {"q": {}}, "additionalProperties": False}, False),
        ({"n": 3}, {"properties": {"n": {"type": "integer", "maximum": 2}}}, False),
        ({"e": "EUR"}, {"properties": {"e": {"enum": ["USD", "EUR"]}}}, True),
        ({"l": [1, "a"]}, {"properties": {"l": {"items": {"type": "integer"}}}}, False),
        (
            {"a": None},
            {"properties": {"a": {"anyOf": [{"type": "string"}, {"type": "null"}]}}},
            True,
        ),
        (
            {"r": "x"},
            {"$defs": {"S": {"type": "integer"}}, "properties": {"r": {"$ref": "#/$defs/S"}}},
            False,
        ),
    ],
)
def test_schema_check(value: Any, schema: dict[str, Any], ok: bool) -> None:
    assert (schema_problem(value, schema) is None) is ok


def test_shipped_model_configs_validate() -> None:
    configs = scan_model_configs().all_valid()
    assert {"sim-planted", "sim-flaky", "claude-sonnet-4-5", "gpt-4.1", "local-llama"} <= set(
        configs
    )
    assert configs["claude-sonnet-4-5"].api_key_env == "ANTHROPIC_API_KEY"
    assert all(config.max_in_flight >= 1 for config in configs.values())


def test_config_errors_name_file_and_field(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text("name: x\napi: openai_chat\nprovider: openai\nmodel: gpt\n")
    with pytest.raises(ConfigError, match=r"bad\.yaml"):
        load_model_config(path)
    path.write_text(
        "name: x\napi: openai_chat\nprovider: openai\nmodel: gpt\napi_key_env: sk-live-123\n"
    )
    with pytest.raises(ConfigError, match="never put a key here"):
        load_model_config(path)


def test_missing_key_variable_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NO_SUCH_KEY_VAR", raising=False)
    config = ModelConfig(
        name="x",
        api="openai_chat",
        provider="openai",
        model="gpt-4.1",
        api_key_env="NO_SUCH_KEY_VAR",
    )
    with pytest.raises(MissingApiKeyError, match="NO_SUCH_KEY_VAR"):
        config.resolve_api_key()


def test_the_display_is_told_of_each_finished_call(sim: SimHandle, tmp_path: Path) -> None:
    """Progress is the caller's to show (issue 29): the session only reports each call."""
    finished: list[str] = []

    async def run() -> None:
        async with new_session(
            tmp_path, on_call_finished=lambda result: finished.append(result.status)
        ) as session:
            client = session.client(sim_config(sim, "tool-responder"))
            await asyncio.gather(
                *(
                    client.call(
                        ModelRequest(
                            messages=(Message(role="user", content=f"w{n}"),), max_tokens=8
                        ),
                        CallTag(lane="m", case_id=str(n)),
                    )
                    for n in range(5)
                )
            )

    asyncio.run(run())
    assert finished == ["ok"] * 5


def test_request_round_trips_through_its_json() -> None:
    assert ModelRequest.model_validate_json(CONVERSATION.model_dump_json()) == CONVERSATION
    assert ToolSpec(name="t").input_schema == {"type": "object", "properties": {}}


def test_the_answer_contract_the_prompts_ask_for_is_read() -> None:
    """Findings from outside (issue 9): a correct `ANSWER: $26.74` was graded wrong, an
    abstention was labelled schema, a bold answer line was not read."""
    money = expect_answer("26.74", kind="money")
    for text in ("ANSWER: $26.74", "**ANSWER:** $26.740", "ANSWER: USD 26.74"):
        assert (
            classify("ok", ModelResponse(text=text, stop_kind="end"), grader=money).label == "right"
        ), text
    assert (
        classify("ok", ModelResponse(text="ANSWER: 26.75", stop_kind="end"), grader=money).label
        == "wrong"
    )
    abstained = classify("ok", ModelResponse(text="ABSTAIN: no such artist", stop_kind="end"))
    assert abstained.label is None and abstained.answer == "ABSTAIN: no such artist"
    assert expect_answer("15000.00", kind="integer")(
        GradeInput(response=ModelResponse(text="x"), answer="15000")
    )
    assert expect_answer("21350,35565", kind="id_list")(
        GradeInput(response=ModelResponse(text="x"), answer="21350, 35565")
    )
    assert expect_answer("16.25", kind="percent")(
        GradeInput(response=ModelResponse(text="x"), answer="16.25%")
    )
