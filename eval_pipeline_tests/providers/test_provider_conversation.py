"""The real `openai` and `anthropic` SDKs complete tool-calling conversations over HTTP."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from eval_pipeline.providers.harness import CallTag
from eval_pipeline.providers.labels import expect_answer
from eval_pipeline.providers.types import Message, ModelRequest, ToolSpec, actionable
from eval_pipeline.sim.process import SimHandle
from eval_pipeline_tests.providers.conftest import LOOKUP, new_session, sim_config

ROYALTY = ToolSpec(
    name="royalty_total",
    description="Sum the royalties of an artist in a month.",
    input_schema={
        "type": "object",
        "properties": {
            "artist_id": {"type": "string", "pattern": "^ART-[0-9]{4}$"},
            "month": {"type": "string", "enum": ["2024-01", "2024-02"]},
            "currency": {"type": "string", "enum": ["USD", "EUR"]},
        },
        "required": ["artist_id", "month"],
        "additionalProperties": False,
    },
)


def run_tool(name: str, arguments: dict[str, object]) -> str:
    """A stand-in tool: a deterministic result from the call."""
    return f"{name}:{arguments.get('artist_id', arguments.get('query'))}=1234.56\nextra line"


async def converse(sim: SimHandle, tmp_path: Path, api: str) -> list[str]:
    async with new_session(tmp_path) as session:
        client = session.client(sim_config(sim, "tool-responder", api=api))
        messages: list[Message] = [
            Message(role="system", content="Use the tools. End with ANSWER: <value>."),
            Message(role="user", content="What did ART-0001 earn in January 2024?"),
        ]
        tools = (ROYALTY, LOOKUP)
        transcript: list[str] = []
        for turn in range(4):
            request = ModelRequest(
                messages=tuple(messages), tools=tools, max_tokens=256, temperature=0, seed=1
            )
            result = await client.call(request, CallTag(lane="product", case_id="c1", turn=turn))
            assert result.status == "ok", result.final.failure_detail
            assert result.response is not None
            reply = actionable(result.response)
            if not reply.tool_calls:
                transcript.append(f"answer:{result.label.answer}")
                break
            assert result.label.label is None  # well-formed tool call, not graded here
            messages.append(
                Message(role="assistant", content=reply.text or "", tool_calls=reply.tool_calls)
            )
            for call in reply.tool_calls:
                arguments = call.parsed_arguments()
                transcript.append(f"call:{call.name}")
                messages.append(
                    Message(
                        role="tool", tool_call_id=call.id, content=run_tool(call.name, arguments)
                    )
                )
        final = await client.call(
            ModelRequest(messages=tuple(messages), tools=tools, max_tokens=256, seed=1),
            CallTag(lane="product", case_id="c1", turn=99),
            expect_answer(transcript[-1].split(":", 1)[1]) if transcript else None,
        )
        transcript.append(str(final.label.label))
        return transcript


@pytest.mark.parametrize("api", ["openai_compatible", "anthropic_messages"])
def test_tool_calling_conversation(sim: SimHandle, tmp_path: Path, api: str) -> None:
    transcript = asyncio.run(converse(sim, tmp_path, api))
    assert transcript[0].startswith("call:")
    name = transcript[0].split(":", 1)[1]
    assert transcript[1].startswith(f"answer:{name}:")
    assert transcript[1].endswith("=1234.56")
    assert transcript[-1] == "right"
    assert sim.request_count() == 3


def test_the_two_formats_agree_on_usage_and_cost(sim: SimHandle, tmp_path: Path) -> None:
    """The sim counts tokens the same way in either format; so do our meters."""
    request = ModelRequest(
        messages=(Message(role="user", content="Say the last word: forty-two"),), max_tokens=32
    )

    async def both() -> list[object]:
        async with new_session(tmp_path) as session:
            out = []
            for api in ("openai_compatible", "anthropic_messages"):
                client = session.client(sim_config(sim, "tool-responder", api=api))
                result = await client.call(request, CallTag(lane="model", case_id="x"))
                out.append((result.final.input_tokens, result.final.cost_usd, result.label.answer))
            return out

    first, second = asyncio.run(both())
    assert first == second
