"""Anthropic Messages wire format: request parsing and response rendering."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from eval_pipeline.sim.errors import SimRequestError
from eval_pipeline.sim.neutral import (
    ARGUMENTS_ENCODER,
    ErrorStatus,
    Reply,
    SimMessage,
    SimTool,
    SimToolCall,
    SimToolChoice,
    SimToolResult,
)
from eval_pipeline.sim.wire_common import ParsedRequest, dumps, optional_int, optional_number

STOP_REASONS = {"end": "end_turn", "tool_use": "tool_use", "max_tokens": "max_tokens"}


def _text_of(content: object, where: str) -> str:
    """Text of a string or of a list of blocks (text blocks joined by newlines)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        pieces: list[str] = []
        for block in content:
            if not isinstance(block, dict):
                raise SimRequestError(f"{where}: each content block must be an object")
            if block.get("type") == "text":
                text = block.get("text")
                if not isinstance(text, str):
                    raise SimRequestError(f"{where}: a text block needs a string 'text'")
                pieces.append(text)
        return "\n".join(pieces)
    raise SimRequestError(f"{where}: content must be a string or a list of blocks")


def _message(message: object, where: str) -> SimMessage:
    if not isinstance(message, dict):
        raise SimRequestError(f"{where} must be an object")
    role = message.get("role")
    if role not in ("user", "assistant"):
        raise SimRequestError(f"{where}: role must be 'user' or 'assistant', not {role!r}")
    content = message.get("content")
    if isinstance(content, str):
        return SimMessage(role=role, text=content)
    if not isinstance(content, list):
        raise SimRequestError(f"{where}: content must be a string or a list of blocks")
    texts: list[str] = []
    calls: list[SimToolCall] = []
    results: list[SimToolResult] = []
    for j, block in enumerate(content):
        at = f"{where}.content[{j}]"
        if not isinstance(block, dict):
            raise SimRequestError(f"{at} must be an object")
        kind = block.get("type")
        if kind == "text":
            texts.append(_text_of([block], at))
        elif kind == "tool_use":
            name = block.get("name")
            if not isinstance(name, str):
                raise SimRequestError(f"{at}: tool_use needs a string 'name'")
            call_input = block.get("input", {})
            arguments = (
                call_input if isinstance(call_input, str) else ARGUMENTS_ENCODER.encode(call_input)
            )
            call_id = block.get("id", "")
            calls.append(
                SimToolCall(
                    name=name, arguments=arguments, id=call_id if isinstance(call_id, str) else ""
                )
            )
        elif kind == "tool_result":
            call_id = block.get("tool_use_id")
            if not isinstance(call_id, str):
                raise SimRequestError(f"{at}: tool_result needs a string 'tool_use_id'")
            results.append(
                SimToolResult(
                    call_id=call_id,
                    text=_text_of(block.get("content"), at),
                    is_error=bool(block.get("is_error", False)),
                )
            )
    return SimMessage(
        role=role, text="\n".join(texts), tool_calls=tuple(calls), tool_results=tuple(results)
    )


def _tools(raw: object) -> tuple[SimTool, ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise SimRequestError("'tools' must be a list")
    tools: list[SimTool] = []
    for i, tool in enumerate(raw):
        if not isinstance(tool, dict) or not isinstance(tool.get("name"), str):
            raise SimRequestError(f"tools[{i}] needs a string 'name'")
        schema = tool.get("input_schema")
        if schema is None:  # a server tool (web search, ...): not callable here
            continue
        if not isinstance(schema, dict):
            raise SimRequestError(f"tools[{i}].input_schema must be an object")
        description = tool.get("description", "")
        tools.append(
            SimTool(
                name=tool["name"],
                description=description if isinstance(description, str) else "",
                input_schema=schema,
            )
        )
    return tuple(tools)


def _tool_choice(raw: object) -> SimToolChoice:
    if raw is None:
        return SimToolChoice()
    kind = raw.get("type") if isinstance(raw, dict) else None
    if kind == "auto":
        return SimToolChoice()
    if kind == "none":
        return SimToolChoice(mode="none")
    if kind == "any":
        return SimToolChoice(mode="required")
    if kind == "tool" and isinstance(raw, dict) and isinstance(raw.get("name"), str):
        return SimToolChoice(mode="tool", name=raw["name"])
    raise SimRequestError("'tool_choice' must be of type auto, any, tool (with name) or none")


def parse(body: Mapping[str, Any]) -> ParsedRequest:
    """Parse a Messages request body (already JSON-decoded)."""
    if body.get("stream"):
        raise SimRequestError("streaming is not supported by the simulated provider")
    max_tokens = optional_int(body, "max_tokens", minimum=1)
    if max_tokens is None:
        raise SimRequestError("max_tokens: Field required")
    raw_messages = body.get("messages")
    if not isinstance(raw_messages, list) or not raw_messages:
        raise SimRequestError("'messages' must be a non-empty list")
    messages = tuple(_message(m, f"messages[{i}]") for i, m in enumerate(raw_messages))
    return ParsedRequest(
        system=_text_of(body.get("system"), "system"),
        messages=messages,
        tools=_tools(body.get("tools")),
        tool_choice=_tool_choice(body.get("tool_choice")),
        max_tokens=max_tokens,
        temperature=optional_number(body, "temperature", 0.0, 1.0),
        seed=None,
    )


def tool_input(arguments: str) -> object:
    """A tool call's ``input``: the decoded arguments when they are a JSON object, otherwise
    the raw text (how the simulator shows a model that wrote broken arguments)."""
    try:
        decoded = json.loads(arguments)
    except ValueError:
        return arguments
    return decoded if isinstance(decoded, dict) else arguments


def render_reply(
    reply: Reply,
    *,
    response_id: str,
    model: str,
    tool_call_ids: Sequence[str],
    input_tokens: int,
    output_tokens: int,
    cache_read_tokens: int = 0,
    cache_write_tokens: int = 0,
) -> bytes:
    """A ``message`` object; ``input_tokens`` are the plain (uncached) prompt tokens."""
    content: list[dict[str, Any]] = [{"type": "text", "text": t} for t in reply.text_blocks]
    for call, call_id in zip(reply.tool_calls, tool_call_ids, strict=True):
        content.append(
            {
                "type": "tool_use",
                "id": call_id,
                "name": call.name,
                "input": tool_input(call.arguments),
            }
        )
    return dumps(
        {
            "id": response_id,
            "type": "message",
            "role": "assistant",
            "model": model,
            "content": content,
            "stop_reason": STOP_REASONS[reply.stop],
            "stop_sequence": None,
            "usage": {
                "input_tokens": input_tokens,
                "output_tokens": output_tokens,
                "cache_creation_input_tokens": cache_write_tokens,
                "cache_read_input_tokens": cache_read_tokens,
                "service_tier": "standard",
            },
        }
    )


_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    503: "overloaded_error",
    529: "overloaded_error",
}


def render_error(error: ErrorStatus, request_id: str) -> bytes:
    """``{"type": "error", "error": {"type", "message"}, "request_id"}``."""
    default = _ERROR_TYPES.get(
        error.status, "api_error" if error.status >= 500 else "invalid_request_error"
    )
    return dumps(
        {
            "type": "error",
            "error": {"type": error.error_type or default, "message": error.message},
            "request_id": request_id,
        }
    )
