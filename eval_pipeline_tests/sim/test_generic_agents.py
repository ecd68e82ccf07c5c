"""The simulated agents that know no world (issue 27, item 2): `sim-tool-user` calls the
offered tool its question names, with the question's numbers, and answers with the result;
`sim-no-tools` answers at once. Neither reads anything but the request."""

from __future__ import annotations

import json

from eval_pipeline.sim.neutral import (
    Reply,
    SimMessage,
    SimRequest,
    SimTool,
    SimToolChoice,
    SimToolResult,
)
from eval_pipeline.sim.profiles import ProfileSetup
from eval_pipeline.sim.profiles.generic_agents import SimNoTools, SimToolUser

ADD = SimTool(
    name="add",
    description="Add two integers: returns a + b.",
    input_schema={
        "type": "object",
        "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
        "required": ["a", "b"],
    },
)
CONTRACT = "\nEnd with one line: ANSWER: <integer>"


def _request(*messages: SimMessage, tools: tuple[SimTool, ...] = (ADD,)) -> SimRequest:
    return SimRequest(
        wire_format="openai",
        model="sim-tool-user",
        profile="sim-tool-user",
        variant=None,
        system="",
        messages=messages,
        tools=tools,
        tool_choice=SimToolChoice(),
        max_tokens=256,
        temperature=None,
        replicate_seed=0,
        occurrence=0,
        server_seed=0,
        body_digest=f"digest-{len(messages)}",
    )


def _user(text: str) -> SimMessage:
    return SimMessage(role="user", text=text)


def test_the_tool_user_calls_the_named_tool_with_the_questions_numbers_then_answers() -> None:
    agent = SimToolUser(ProfileSetup(name="sim-tool-user", server_seed=0))
    question = _user("What is 1200 + -34?" + CONTRACT)
    first = agent.respond(_request(question))
    assert isinstance(first, Reply) and first.stop == "tool_use"
    (call,) = first.tool_calls
    assert call.name == "add" and json.loads(call.arguments) == {"a": 1200, "b": -34}
    replied = SimMessage(role="user", tool_results=(SimToolResult(call_id="c1", text="1166"),))
    answer = agent.respond(
        _request(question, SimMessage(role="assistant", tool_calls=(call,)), replied)
    )
    assert isinstance(answer, Reply) and answer.text_blocks[-1].endswith("ANSWER: 1166")


def test_with_no_tool_the_question_names_both_agents_answer_at_once() -> None:
    question = _user("What is 12 × 12? There is no multiplication tool." + CONTRACT)
    for agent in (
        SimToolUser(ProfileSetup(name="sim-tool-user", server_seed=0)),
        SimNoTools(ProfileSetup(name="sim-no-tools", server_seed=0)),
    ):
        reply = agent.respond(_request(question))
        assert isinstance(reply, Reply) and not reply.tool_calls
        assert reply.text_blocks[-1] == "ANSWER: 12"


def test_a_tool_error_makes_the_tool_user_abstain() -> None:
    agent = SimToolUser(ProfileSetup(name="sim-tool-user", server_seed=0))
    failed = SimMessage(
        role="user",
        tool_results=(SimToolResult(call_id="c1", text='{"error":"boom"}', is_error=True),),
    )
    reply = agent.respond(_request(_user("What is 1 + 2?" + CONTRACT), failed))
    assert isinstance(reply, Reply) and "ABSTAIN:" in reply.text_blocks[-1]
