"""OpenAI Chat Completions wire format: request parsing and response rendering."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from eval_pipeline.sim.errors import SimRequestError
from eval_pipeline.sim.neutral import (
    ErrorStatus,
    Reply,
    SimMessage,
    SimTool,
    SimToolCall,
    SimToolChoice,
    SimToolResult,
)
from eval_pipeline.sim.wire_common import (
    ParsedRequest,
    dumps,
    optional_int,
    optional_number,
)

FINISH_REASONS = {"end": "stop", "tool_use": "tool_calls", "max_tokens": "length"}
_EMPTY_SCHEMA: Mapping[str, Any] = {"type": "object", "properties": {}}


def _content_text(content: object, where: str) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        pieces: list[str] = []
        for part in content:
            if not isinstance(part, dict):
                raise SimRequestError(f"{where}: each content part must be an object")
            if part.get("type") in ("text", "refusal"):
                text = part.get("text", part.get("refusal"))
                if not isinstance(text, str):
                    raise SimRequestError(f"{where}: a text part needs a string 'text'")
                pieces.append(text)
        return "\n".join(pieces)
    raise SimRequestError(f"{where}: content must be a string, a list of parts or null")


def _tool_calls(raw: object, where: str) -> tuple[SimToolCall, ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise SimRequestError(f"{where}.tool_calls must be a list")
    calls: list[SimToolCall] = []
    for i, item in enumerate(raw):
        function = item.get("function") if isinstance(item, dict) else None
        if not isinstance(function, dict) or not isinstance(function.get("name"), str):
            raise SimRequestError(f"{where}.tool_calls[{i}] needs function.name")
        arguments = function.get("arguments", "")
        if not isinstance(arguments, str):
            raise SimRequestError(f"{where}.tool_calls[{i}].function.arguments must be a string")
        call_id = item.get("id", "")
        calls.append(
            SimToolCall(
                name=function["name"],
                arguments=arguments,
                id=call_id if isinstance(call_id, str) else "",
            )
        )
    return tuple(calls)


def _messages(raw: object) -> tuple[str, tuple[SimMessage, ...]]:
    if not isinstance(raw, list) or not raw:
        raise SimRequestError("'messages' must be a non-empty list")
    system: list[str] = []
    messages: list[SimMessage] = []
    pending_results: list[SimToolResult] = []

    def flush() -> None:
        if pending_results:
            messages.append(SimMessage(role="user", tool_results=tuple(pending_results)))
            pending_results.clear()

    for i, message in enumerate(raw):
        where = f"messages[{i}]"
        if not isinstance(message, dict):
            raise SimRequestError(f"{where} must be an object")
        role = message.get("role")
        content = message.get("content")
        if role in ("tool", "function"):
            call_id = message.get("tool_call_id", message.get("name"))
            if not isinstance(call_id, str):
                raise SimRequestError(f"{where}: a tool message needs 'tool_call_id'")
            pending_results.append(
                SimToolResult(call_id=call_id, text=_content_text(content, where))
            )
            continue
        flush()
        if role in ("system", "developer"):
            system.append(_content_text(content, where))
        elif role == "user":
            messages.append(SimMessage(role="user", text=_content_text(content, where)))
        elif role == "assistant":
            messages.append(
                SimMessage(
                    role="assistant",
                    text=_content_text(content, where),
                    tool_calls=_tool_calls(message.get("tool_calls"), where),
                )
            )
        else:
            raise SimRequestError(f"{where}: unknown role {role!r}")
    flush()
    return "\n\n".join(system), tuple(messages)


def _tools(raw: object) -> tuple[SimTool, ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise SimRequestError("'tools' must be a list")
    tools: list[SimTool] = []
    for i, tool in enumerate(raw):
        if not isinstance(tool, dict):
            raise SimRequestError(f"tools[{i}] must be an object")
        if tool.get("type", "function") != "function":
            continue
        function = tool.get("function")
        if not isinstance(function, dict) or not isinstance(function.get("name"), str):
            raise SimRequestError(f"tools[{i}] needs function.name")
        parameters = function.get("parameters", _EMPTY_SCHEMA)
        if not isinstance(parameters, dict):
            raise SimRequestError(f"tools[{i}].function.parameters must be an object")
        description = function.get("description", "")
        tools.append(
            SimTool(
                name=function["name"],
                description=description if isinstance(description, str) else "",
                input_schema=parameters,
            )
        )
    return tuple(tools)


def _tool_choice(raw: object) -> SimToolChoice:
    if raw is None or raw == "auto":
        return SimToolChoice()
    if raw == "none":
        return SimToolChoice(mode="none")
    if raw == "required":
        return SimToolChoice(mode="required")
    if isinstance(raw, dict):
        function = raw.get("function")
        if isinstance(function, dict) and isinstance(function.get("name"), str):
            return SimToolChoice(mode="tool", name=function["name"])
    raise SimRequestError("'tool_choice' must be auto, none, required or a named function")


def parse(body: Mapping[str, Any]) -> ParsedRequest:
    """Parse a Chat Completions request body (already JSON-decoded)."""
    if body.get("stream"):
        raise SimRequestError("streaming is not supported by the simulated provider")
    n = body.get("n")
    if n is not None and n != 1:
        raise SimRequestError("only n=1 is supported by the simulated provider")
    system, messages = _messages(body.get("messages"))
    max_tokens = optional_int(body, "max_completion_tokens", minimum=1)
    if max_tokens is None:
        max_tokens = optional_int(body, "max_tokens", minimum=1)
    return ParsedRequest(
        system=system,
        messages=messages,
        tools=_tools(body.get("tools")),
        tool_choice=_tool_choice(body.get("tool_choice")),
        max_tokens=max_tokens,
        temperature=optional_number(body, "temperature", 0.0, 2.0),
        seed=optional_int(body, "seed"),
    )


def render_reply(
    reply: Reply,
    *,
    response_id: str,
    created: int,
    model: str,
    tool_call_ids: Sequence[str],
    input_tokens: int,
    output_tokens: int,
    cache_read_tokens: int = 0,
) -> bytes:
    """A ``chat.completion`` object; ``input_tokens`` counts every prompt token, of which
    ``cache_read_tokens`` were read from the prompt cache (``cached_tokens``)."""
    message: dict[str, Any] = {
        "role": "assistant",
        "content": reply.text,
        "refusal": None,
        "annotations": [],
    }
    if reply.tool_calls:
        message["tool_calls"] = [
            {
                "id": call_id,
                "type": "function",
                "function": {"name": call.name, "arguments": call.arguments},
            }
            for call, call_id in zip(reply.tool_calls, tool_call_ids, strict=True)
        ]
    return dumps(
        {
            "id": response_id,
            "object": "chat.completion",
            "created": created,
            "model": model,
            "choices": [
                {
                    "index": 0,
                    "message": message,
                    "logprobs": None,
                    "finish_reason": FINISH_REASONS[reply.stop],
                }
            ],
            "usage": {
                "prompt_tokens": input_tokens,
                "completion_tokens": output_tokens,
                "total_tokens": input_tokens + output_tokens,
                "prompt_tokens_details": {"cached_tokens": cache_read_tokens, "audio_tokens": 0},
                "completion_tokens_details": {
                    "reasoning_tokens": 0,
                    "audio_tokens": 0,
                    "accepted_prediction_tokens": 0,
                    "rejected_prediction_tokens": 0,
                },
            },
            "service_tier": "default",
            "system_fingerprint": "fp_evalp_sim",
        }
    )


_ERROR_TYPES = {
    400: ("invalid_request_error", None),
    401: ("invalid_request_error", "invalid_api_key"),
    403: ("invalid_request_error", "permission_denied"),
    404: ("invalid_request_error", "model_not_found"),
    429: ("requests", "rate_limit_exceeded"),
}


def render_error(error: ErrorStatus) -> bytes:
    """``{"error": {"message", "type", "param", "code"}}`` as the OpenAI API writes it."""
    default_type, default_code = _ERROR_TYPES.get(
        error.status,
        ("server_error", None) if error.status >= 500 else ("invalid_request_error", None),
    )
    return dumps(
        {
            "error": {
                "message": error.message,
                "type": error.error_type or default_type,
                "param": None,
                "code": error.code if error.code is not None else default_code,
            }
        }
    )
