"""Translation between the neutral request/response and the two wire formats.

Pure functions: they build the JSON the SDKs send and read the raw 200 body the SDKs
received, without the SDKs' own parsing, so an empty, malformed or partial body is read
into a :class:`ModelResponse` with a `body_problem` instead of an exception.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from eval_pipeline.providers.config import ModelConfig

from eval_pipeline.providers.types import (
    BodyProblem,
    Message,
    ModelRequest,
    ModelResponse,
    StopKind,
    ToolCall,
    Usage,
)

OPENAI_STOP_KINDS: dict[str, StopKind] = {
    "stop": "end",
    "tool_calls": "tool_use",
    "function_call": "tool_use",
    "length": "max_tokens",
}
ANTHROPIC_STOP_KINDS: dict[str, StopKind] = {
    "end_turn": "end",
    "stop_sequence": "end",
    "tool_use": "tool_use",
    "max_tokens": "max_tokens",
    "model_context_window_exceeded": "max_tokens",
}


def _problem(problem: BodyProblem) -> ModelResponse:
    return ModelResponse(body_problem=problem)


def _load_object(body: str) -> dict[str, Any] | ModelResponse:
    if not body.strip():
        return _problem("empty_body")
    try:
        data = json.loads(body)
    except ValueError:
        return _problem("malformed_json")
    if not isinstance(data, dict):
        return _problem("not_an_object")
    return data


def _int(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


# --- OpenAI Chat Completions -------------------------------------------------------------


def openai_messages(request: ModelRequest) -> list[dict[str, Any]]:
    """Neutral messages in Chat Completions shape."""
    wire: list[dict[str, Any]] = []
    for message in request.messages:
        if message.role == "tool":
            wire.append(
                {"role": "tool", "tool_call_id": message.tool_call_id, "content": message.content}
            )
        elif message.role == "assistant" and message.tool_calls:
            wire.append(
                {
                    "role": "assistant",
                    "content": message.content or None,
                    "tool_calls": [
                        {
                            "id": call.id,
                            "type": "function",
                            "function": {"name": call.name, "arguments": call.arguments},
                        }
                        for call in message.tool_calls
                    ],
                }
            )
        else:
            wire.append({"role": message.role, "content": message.content})
    return wire


def openai_body(request: ModelRequest, max_tokens_field: str = "max_tokens") -> dict[str, Any]:
    """The Chat Completions parameters (without `model`) for `request`."""
    body: dict[str, Any] = {
        "messages": openai_messages(request),
        max_tokens_field: request.max_tokens,
    }
    if request.tools:
        body["tools"] = [
            {
                "type": "function",
                "function": {
                    "name": tool.name,
                    "description": tool.description,
                    "parameters": tool.input_schema,
                },
            }
            for tool in request.tools
        ]
    if request.tool_choice is not None:
        if request.tool_choice in ("auto", "none", "required"):
            body["tool_choice"] = request.tool_choice
        else:
            body["tool_choice"] = {"type": "function", "function": {"name": request.tool_choice}}
    if request.temperature is not None:
        body["temperature"] = request.temperature
    if request.top_p is not None:
        body["top_p"] = request.top_p
    if request.stop:
        body["stop"] = list(request.stop)
    if request.seed is not None:
        body["seed"] = request.seed
    return body


def parse_openai_body(body: str) -> ModelResponse:
    """A Chat Completions 200 body read into a response (first choice only)."""
    data = _load_object(body)
    if isinstance(data, ModelResponse):
        return data
    usage = _openai_usage(data.get("usage"))
    choices = data.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        return ModelResponse(body_problem="no_choices", usage=usage)
    choice = choices[0]
    finish = choice.get("finish_reason")
    finish_reason = finish if isinstance(finish, str) else None
    message = choice.get("message")
    if not isinstance(message, dict):
        message = {}
    content = message.get("content")
    text = content if isinstance(content, str) else None
    calls: list[ToolCall] = []
    raw_calls = message.get("tool_calls")
    for index, raw in enumerate(raw_calls if isinstance(raw_calls, list) else []):
        if not isinstance(raw, dict):
            continue
        function = raw.get("function") if isinstance(raw.get("function"), dict) else {}
        assert isinstance(function, dict)
        arguments = function.get("arguments")
        calls.append(
            ToolCall(
                id=str(raw.get("id") or f"call_{index}"),
                name=str(function.get("name") or ""),
                arguments=arguments if isinstance(arguments, str) else json.dumps(arguments),
            )
        )
    return _reply(data, text, calls, finish_reason, OPENAI_STOP_KINDS, usage)


def _reply(
    data: dict[str, Any],
    text: str | None,
    calls: list[ToolCall],
    finish_reason: str | None,
    stop_kinds: Mapping[str, StopKind],
    usage: Usage | None,
) -> ModelResponse:
    """The wire-neutral reply both formats parse into."""
    stop_kind = None if finish_reason is None else stop_kinds.get(finish_reason, "other")
    problem: BodyProblem | None = None if (text or calls) else "empty_reply"
    response_id = data.get("id")
    reported = data.get("model")
    return ModelResponse(
        text=text,
        tool_calls=tuple(calls),
        stop_kind=stop_kind,
        finish_reason=finish_reason,
        usage=usage,
        response_id=response_id if isinstance(response_id, str) else None,
        reported_model=reported if isinstance(reported, str) else None,
        body_problem=problem,
    )


def _openai_usage(raw: object) -> Usage | None:
    """Chat Completions usage; `prompt_tokens` include the cached ones, which are counted
    apart here (as Anthropic reports them), so no input token is priced twice."""
    if not isinstance(raw, dict):
        return None
    details = raw.get("prompt_tokens_details")
    prompt = _int(raw.get("prompt_tokens"))
    cached = min(_int(details.get("cached_tokens")) if isinstance(details, dict) else 0, prompt)
    return Usage(
        input_tokens=prompt - cached,
        output_tokens=_int(raw.get("completion_tokens")),
        cache_read_tokens=cached,
    )


# --- Anthropic Messages ------------------------------------------------------------------


def _tool_input(call: ToolCall) -> Any:
    try:
        value = json.loads(call.arguments)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def _anthropic_turn(message: Message) -> tuple[str, list[dict[str, Any]]]:
    if message.role == "tool":
        block: dict[str, Any] = {
            "type": "tool_result",
            "tool_use_id": message.tool_call_id,
            "content": message.content,
        }
        if message.is_error:
            block["is_error"] = True
        return "user", [block]
    blocks: list[dict[str, Any]] = []
    if message.content:
        blocks.append({"type": "text", "text": message.content})
    for call in message.tool_calls:
        blocks.append(
            {"type": "tool_use", "id": call.id, "name": call.name, "input": _tool_input(call)}
        )
    return message.role, blocks


def anthropic_body(request: ModelRequest) -> dict[str, Any]:
    """The Messages parameters (without `model`); system turns go to `system`.

    Consecutive turns of one role (tool results followed by user text) are merged into
    one message, as the Messages API requires alternating roles.
    """
    system = "\n\n".join(m.content for m in request.messages if m.role == "system")
    messages: list[dict[str, Any]] = []
    for message in request.messages:
        if message.role == "system":
            continue
        role, blocks = _anthropic_turn(message)
        if messages and messages[-1]["role"] == role:
            messages[-1]["content"].extend(blocks)
        else:
            messages.append({"role": role, "content": blocks})
    body: dict[str, Any] = {"messages": messages, "max_tokens": request.max_tokens}
    if system:
        body["system"] = system
    if request.tools:
        body["tools"] = [
            {"name": tool.name, "description": tool.description, "input_schema": tool.input_schema}
            for tool in request.tools
        ]
    if request.tool_choice is not None:
        choice = {"auto": {"type": "auto"}, "none": {"type": "none"}, "required": {"type": "any"}}
        body["tool_choice"] = choice.get(
            request.tool_choice, {"type": "tool", "name": request.tool_choice}
        )
    if request.temperature is not None:
        body["temperature"] = request.temperature
    if request.top_p is not None:
        body["top_p"] = request.top_p
    if request.stop:
        body["stop_sequences"] = list(request.stop)
    return body


def parse_anthropic_body(body: str) -> ModelResponse:
    """A Messages 200 body read into a response; text blocks are joined with newlines."""
    data = _load_object(body)
    if isinstance(data, ModelResponse):
        return data
    usage = _anthropic_usage(data.get("usage"))
    content = data.get("content")
    if not isinstance(content, list):
        return ModelResponse(body_problem="no_content", usage=usage)
    texts: list[str] = []
    calls: list[ToolCall] = []
    for index, block in enumerate(content):
        if not isinstance(block, dict):
            continue
        if block.get("type") == "text" and isinstance(block.get("text"), str):
            texts.append(block["text"])
        elif block.get("type") == "tool_use":
            calls.append(
                ToolCall(
                    id=str(block.get("id") or f"toolu_{index}"),
                    name=str(block.get("name") or ""),
                    arguments=json.dumps(block.get("input")),
                )
            )
    text = "\n".join(texts) if texts else None
    stop = data.get("stop_reason")
    finish_reason = stop if isinstance(stop, str) else None
    return _reply(data, text, calls, finish_reason, ANTHROPIC_STOP_KINDS, usage)


def _anthropic_usage(raw: object) -> Usage | None:
    if not isinstance(raw, dict):
        return None
    return Usage(
        input_tokens=_int(raw.get("input_tokens")),
        output_tokens=_int(raw.get("output_tokens")),
        cache_read_tokens=_int(raw.get("cache_read_input_tokens")),
        cache_write_tokens=_int(raw.get("cache_creation_input_tokens")),
    )


_WIRE_JSON = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def encode_wire_body(body: Mapping[str, Any]) -> bytes:
    """The wire body as sent: compact JSON in UTF-8, non-ASCII kept as is. Serialized once
    per call; its length bounds the call's input tokens (see `budget.input_token_bound`)."""
    return _WIRE_JSON.encode(body).encode()


def wire_body(config: ModelConfig, request: ModelRequest) -> dict[str, Any]:
    """The body sent for `request` under `config`'s wire format: what the transports send
    and what the budget and the dry run bound."""
    body: dict[str, Any] = {"model": config.model}
    if config.api == "anthropic_messages":
        body.update(anthropic_body(request))
    else:
        body.update(openai_body(request, config.max_tokens_field))
    body.update(request.extra)
    return body
