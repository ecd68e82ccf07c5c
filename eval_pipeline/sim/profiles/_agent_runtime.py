"""How a simulated agent reads its conversation and replays its plan.

A simulated agent is stateless: every request carries the whole conversation, so the agent
re-reads it each time. Its plan for a question is a generator that yields the tool calls it
wants made and receives their results (:data:`Plan`); :func:`drive` runs the plan from the
start, answering each call from the results already in the conversation, until the plan
either finishes (the final answer) or asks for a call that has not been made yet (the next
thing to emit). Calls are matched to results by what they mean (tool name and arguments with
the agent's own manglings undone, :func:`call_key`), not by position, so a bounced stall, a
retried call or a harness nudge in between does not confuse the replay.

Nothing here reads a file, the world or the answer key: only the request.
"""

from __future__ import annotations

import json
import re
from collections.abc import Generator, Mapping
from dataclasses import dataclass
from typing import Any

from eval_pipeline.sim.errors import AgentAbstainError
from eval_pipeline.sim.neutral import SimMessage, SimRequest, SimToolCall, SimToolResult

CHANNELS: tuple[str, ...] = ("streaming", "download", "physical", "sync")
"""The enum values of ``channel`` (the calculator's schema); shorthands expand to these."""

_SCHEMA_ERROR = re.compile(r"schema|valid JSON|JSON object", re.IGNORECASE)
_CUT_OFF_NOTICE = re.compile(r"cut off|truncat|max[_ ]?tokens|token limit", re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class Call:
    """A tool call a plan wants made, with the arguments as the agent means them."""

    name: str
    arguments: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class ToolReply:
    """A tool result as the agent reads it: parsed JSON, or the error it reports."""

    ok: bool
    data: Any = None
    error: str = ""
    schema_error: bool = False
    """The tool refused the arguments themselves (they broke its schema or did not parse)."""
    cut_off_notice: bool = False
    """The harness says the call was cut off (at the token limit) and was not executed."""


@dataclass(frozen=True, slots=True)
class Exchange:
    """One tool call the agent made earlier in the conversation, and its result if any."""

    call: SimToolCall
    key: str | None
    """:func:`call_key` of the call; None when its arguments are not a JSON object."""
    reply: ToolReply | None


Plan = Generator[Call, ToolReply, str]
"""A plan: yields calls, receives their results, returns the final answer text."""


def read_result(result: SimToolResult) -> ToolReply:
    """A tool result as the agent reads it. Errors are flagged by the wire format
    (Anthropic's ``is_error``) or by their body (``{"error": "..."}``, as the OpenAI format
    has no error flag)."""
    text = result.text.strip()
    try:
        parsed: Any = json.loads(text)
    except ValueError:
        parsed = None
    error_body = isinstance(parsed, dict) and set(parsed) == {"error"}
    if result.is_error or error_body:
        message = str(parsed["error"]) if error_body else text
        return ToolReply(
            ok=False,
            error=message,
            schema_error=bool(_SCHEMA_ERROR.search(message)),
            cut_off_notice=bool(_CUT_OFF_NOTICE.search(message)),
        )
    return ToolReply(ok=True, data=text if parsed is None else parsed)


def expand_channel(value: str) -> str:
    """A channel shorthand (``stream``, ``Down``) expanded to the one channel it starts;
    anything else unchanged."""
    folded = value.strip().lower()
    matches = [c for c in CHANNELS if c.startswith(folded)] if folded else []
    return matches[0] if len(matches) == 1 else value


def unmangle(arguments: Mapping[str, Any]) -> dict[str, Any]:
    """Arguments with the manglings a simulated agent makes undone: a scalar wrapped as
    ``{"value": x}`` or ``[x]``, an integer clause number as text, a channel shorthand."""
    out: dict[str, Any] = {}
    for name, value in arguments.items():
        if isinstance(value, dict) and set(value) == {"value"}:
            value = value["value"]
        elif isinstance(value, list) and len(value) == 1 and not isinstance(value[0], dict):
            value = value[0]
        if name == "clause_number" and isinstance(value, str) and value.strip().isdigit():
            value = int(value)
        if name == "channel" and isinstance(value, str):
            value = expand_channel(value)
        out[name] = value
    return out


def call_key(name: str, arguments: Mapping[str, Any]) -> str:
    """What a call means: its tool and its unmangled arguments, as canonical JSON."""
    return name + ":" + json.dumps(unmangle(arguments), sort_keys=True, separators=(",", ":"))


def parse_arguments(text: str) -> dict[str, Any] | None:
    """A call's argument text as an object, or None when it is not one (cut off, broken)."""
    try:
        value = json.loads(text) if text.strip() else {}
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


class Transcript:
    """What the agent can know: the question and its own earlier calls with their results."""

    def __init__(self, request: SimRequest) -> None:
        messages = request.messages
        self.first_user = next(
            (i for i, m in enumerate(messages) if m.role == "user" and m.text), None
        )
        self.prompt = "" if self.first_user is None else messages[self.first_user].text
        self.exchanges = tuple(_exchanges(messages))
        last_assistant = max(
            (i for i, m in enumerate(messages) if m.role == "assistant"), default=None
        )
        after = last_assistant if last_assistant is not None else self.first_user
        self.harness_spoke = after is not None and any(
            m.role == "user" and m.text for m in messages[after + 1 :]
        )
        """A user message with text followed the agent's last reply (a nudge, a notice)."""
        last_calls = () if last_assistant is None else messages[last_assistant].tool_calls
        self.last_reply_was_text = last_assistant is not None and not last_calls
        self.cut_off_notice = any(
            e.reply is not None and e.reply.cut_off_notice
            for e in self.exchanges
            if e.call in last_calls
        )

    @property
    def nudged(self) -> bool:
        """The harness answered the agent's last reply with a nudge or a cut-off notice."""
        return self.harness_spoke or self.cut_off_notice

    def attempts(self, call: Call) -> list[Exchange]:
        """Earlier calls meaning ``call`` that got a result, in order."""
        key = call_key(call.name, call.arguments)
        return [e for e in self.exchanges if e.key == key and e.reply is not None]

    def broken_calls(self, name: str) -> list[Exchange]:
        """Earlier calls of ``name`` whose arguments did not parse (cut off or broken)."""
        return [e for e in self.exchanges if e.call.name == name and e.key is None]


def _exchanges(messages: tuple[SimMessage, ...]) -> list[Exchange]:
    results: dict[str, SimToolResult] = {}
    for message in messages:
        for sent in message.tool_results:
            results.setdefault(sent.call_id, sent)
    found: list[Exchange] = []
    for i, message in enumerate(messages):
        if message.role != "assistant" or not message.tool_calls:
            continue
        following = messages[i + 1].tool_results if i + 1 < len(messages) else ()
        for j, call in enumerate(message.tool_calls):
            result: SimToolResult | None = results.get(call.id) if call.id else None
            if result is None and len(following) == len(message.tool_calls):
                result = following[j]
            arguments = parse_arguments(call.arguments)
            found.append(
                Exchange(
                    call=call,
                    key=None if arguments is None else call_key(call.name, arguments),
                    reply=None if result is None else read_result(result),
                )
            )
    return found


@dataclass(frozen=True, slots=True)
class Pending:
    """The plan needs this call, the ``step``-th of the plan (from 0), made (again)."""

    step: int
    call: Call
    attempts: tuple[Exchange, ...]
    """Earlier attempts at it; each came back with an error about its arguments."""


def drive(
    plan: Plan, transcript: Transcript, max_attempts: int, offered: frozenset[str]
) -> str | Pending:
    """Replay ``plan`` over the conversation: the final answer text, or the call to make next.

    A call whose earlier attempts all broke the tool's schema is pending again until
    ``max_attempts`` attempts were made; then the plan receives the last error (and gives
    up). Any other error is handed to the plan at once. A plan asking for a tool that was
    not offered abstains.
    """
    step = 0
    try:
        call = next(plan)
        while True:
            if call.name not in offered:
                raise AgentAbstainError(f"the tool {call.name} I need is not available")
            attempts = transcript.attempts(call)
            reply = next((e.reply for e in attempts if e.reply is not None and e.reply.ok), None)
            if reply is None and attempts:
                last = attempts[-1].reply
                if last is not None and (not last.schema_error or len(attempts) >= max_attempts):
                    reply = last
            if reply is None:
                return Pending(step=step, call=call, attempts=tuple(attempts))
            call = plan.send(reply)
            step += 1
    except StopIteration as done:
        return str(done.value)
    except AgentAbstainError as stop:
        return abstain_text(stop.reason)


def abstain_text(reason: str) -> str:
    return f"I cannot answer this from the records.\nABSTAIN: {reason}"


def use(tool: str, /, **arguments: Any) -> Generator[Call, ToolReply, Any]:
    """Call a tool inside a plan; an error result makes the agent abstain, citing it."""
    reply = yield Call(tool, arguments)
    if not reply.ok:
        raise AgentAbstainError(f"{tool} returned an error: {reply.error}")
    return reply.data


def field(data: Any, *path: str | int) -> Any:
    """``data[path0][path1]...`` of a tool result; a result without it makes the agent
    abstain, naming what was missing (a tool answering in another shape)."""
    value = data
    for step in path:
        try:
            value = value[step]
        except (KeyError, IndexError, TypeError) as missing:
            where = "/".join(str(p) for p in path)
            raise AgentAbstainError(f"the tool result has no {where}") from missing
    return value
