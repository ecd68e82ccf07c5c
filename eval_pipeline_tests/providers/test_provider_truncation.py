"""Truncation contract: a cut-off reply is never acted on, even when its prefix parses.

The shape is the one from the field: a payout batch cut at max_tokens exactly between two
entries, so the prefix is valid JSON with entries missing. The naive runtime (act when
the arguments parse) submits the partial batch; the contract refuses it.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from pathlib import Path

import pytest

from eval_pipeline.providers.errors import TruncatedReplyError
from eval_pipeline.providers.harness import CallTag
from eval_pipeline.providers.labels import classify, expect_answer
from eval_pipeline.providers.types import ModelResponse, ToolCall, ToolSpec, actionable
from eval_pipeline.providers.wire import parse_anthropic_body, parse_openai_body
from eval_pipeline.sim.process import SimHandle
from eval_pipeline_tests.providers.conftest import LOOKUP, new_session, sim_config
from eval_pipeline_tests.providers.test_provider_planted import planted_request

SUBMIT = ToolSpec(
    name="submit_payout_batch",
    input_schema={
        "type": "object",
        "properties": {"allocations": {"type": "array", "items": {"type": "object"}}},
        "required": ["allocations"],
    },
)
# A batch of 3 allocations, cut after the 2nd: the prefix closes cleanly and parses.
PARTIAL_BATCH = json.dumps(
    {
        "allocations": [
            {"artist_id": "ART-0001", "amount": "10.00"},
            {"artist_id": "ART-0002", "amount": "20.00"},
        ]
    }
)
OPENAI_CUT = json.dumps(
    {
        "id": "c1",
        "choices": [
            {
                "index": 0,
                "finish_reason": "length",
                "message": {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "id": "call_1",
                            "type": "function",
                            "function": {"name": "submit_payout_batch", "arguments": PARTIAL_BATCH},
                        }
                    ],
                },
            }
        ],
        "usage": {"prompt_tokens": 900, "completion_tokens": 4096},
    }
)
ANTHROPIC_CUT = json.dumps(
    {
        "id": "m1",
        "type": "message",
        "role": "assistant",
        "stop_reason": "max_tokens",
        "content": [
            {
                "type": "tool_use",
                "id": "toolu_1",
                "name": "submit_payout_batch",
                "input": json.loads(PARTIAL_BATCH),
            }
        ],
        "usage": {"input_tokens": 900, "output_tokens": 4096},
    }
)

Executor = Callable[[ModelResponse, list[str]], None]


def contract_runtime(response: ModelResponse, submitted: list[str]) -> None:
    """The runtime under the contract: act only on what `actionable` hands over."""
    for call in actionable(response).tool_calls:
        submitted.append(call.arguments)


def naive_runtime(response: ModelResponse, submitted: list[str]) -> None:
    """The old runtime: act on any tool call whose arguments parse."""
    for call in response.tool_calls:
        json.loads(call.arguments)
        submitted.append(call.arguments)


def refuses_partial_batch(runtime: Executor, response: ModelResponse) -> bool:
    submitted: list[str] = []
    try:
        runtime(response, submitted)
    except TruncatedReplyError:
        return not submitted
    return not submitted


@pytest.mark.parametrize(
    "response",
    [parse_openai_body(OPENAI_CUT), parse_anthropic_body(ANTHROPIC_CUT)],
    ids=["openai", "anthropic"],
)
def test_truncated_valid_json_prefix_is_never_acted_on(response: ModelResponse) -> None:
    assert response.truncated
    (call,) = response.tool_calls
    assert isinstance(call.parsed_arguments(), dict)  # the prefix does parse
    assert refuses_partial_batch(contract_runtime, response)
    # ... and the naive runtime this contract replaces would have submitted it:
    assert not refuses_partial_batch(naive_runtime, response)


def test_truncated_text_never_becomes_an_answer() -> None:
    response = ModelResponse(
        text="Net payable computed.\nANSWER: 42", stop_kind="max_tokens", finish_reason="length"
    )
    label = classify("ok", response, grader=expect_answer("42"))
    assert label.label == "truncated"
    assert label.answer is None
    with pytest.raises(TruncatedReplyError):
        actionable(response)


def test_truncated_label_wins_over_a_valid_tool_call() -> None:
    response = ModelResponse(
        tool_calls=(ToolCall(id="1", name="lookup", arguments='{"query": "ART-0001"}'),),
        stop_kind="max_tokens",
        finish_reason="max_tokens",
    )
    assert classify("ok", response, (LOOKUP,)).label == "truncated"


def test_sim_truncated_replies_are_refused_over_http(sim: SimHandle, tmp_path: Path) -> None:
    async def run() -> list[ModelResponse]:
        async with new_session(tmp_path) as session:
            client = session.client(sim_config(sim, "planted"))
            out = []
            for n in (8, 11):  # '{"artist_id": "ART-0001", "amount": "4"}' parses
                result = await client.call(planted_request(n), CallTag(lane="m", case_id=str(n)))
                assert result.label.label == "truncated"
                assert result.response is not None
                out.append(result.response)
            return out

    parsed_prefix, cut_call = asyncio.run(run())
    assert json.loads(parsed_prefix.text or "") == {"artist_id": "ART-0001", "amount": "4"}
    for response in (parsed_prefix, cut_call):
        with pytest.raises(TruncatedReplyError):
            actionable(response)
