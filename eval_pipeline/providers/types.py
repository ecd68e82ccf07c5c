"""The typed request and response of one model call, independent of any wire format.

The lanes build a :class:`ModelRequest` and read a :class:`ModelResponse`; the adapters
translate to and from the Anthropic Messages and OpenAI Chat Completions formats. A
response whose stop reason says it was cut off is never acted on: :func:`actionable` is
the one way to get text or tool calls to act on, and it refuses a truncated reply.
"""

from __future__ import annotations

import json
from typing import Any, Literal

from pydantic import Field, JsonValue, model_validator

from eval_pipeline.providers.errors import TruncatedReplyError
from eval_pipeline.records import FrozenRecord

Role = Literal["system", "user", "assistant", "tool"]
StopKind = Literal["end", "tool_use", "max_tokens", "other"]
ToolChoice = Literal["auto", "none", "required"] | str
"""`auto`, `none`, `required`, or the name of the one tool that must be called."""

OUTPUT_LIMIT_KEYS: tuple[str, ...] = (
    "max_tokens",
    "max_completion_tokens",
    "max_output_tokens",
    "max_tokens_to_sample",
)
"""Wire parameters that set the output limit under one name or another. In `extra` they
would override `max_tokens` on the wire while the budget priced `max_tokens`, so they are
folded into `max_tokens` instead (the largest limit asked for wins)."""

REFUSED_EXTRA_KEYS: dict[str, str] = {
    "model": "the wire model comes from the model config, which also prices the call",
    "stream": "replies are read whole; a streamed body would not parse",
}


class ToolCall(FrozenRecord):
    """A tool call as the model emitted it; `arguments` is the raw JSON text, maybe invalid."""

    id: str
    name: str
    arguments: str

    def parsed_arguments(self) -> Any:
        """The arguments parsed as JSON; raises ValueError when they are not valid JSON."""
        return json.loads(self.arguments)


class Message(FrozenRecord):
    """One conversation turn. `tool` messages answer the call named by `tool_call_id`."""

    role: Role
    content: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None
    is_error: bool = False


def _empty_object_schema() -> dict[str, JsonValue]:
    return {"type": "object", "properties": {}}


class ToolSpec(FrozenRecord):
    """A tool offered to the model, with its JSON schema for arguments."""

    name: str
    description: str = ""
    input_schema: dict[str, JsonValue] = Field(default_factory=_empty_object_schema)


class ModelRequest(FrozenRecord):
    """Everything that is sent to the model, so everything that can change its answer.

    `seed` is sent to providers that take one (and as a header to the simulated provider);
    `replicate` is the sampling replicate index, part of the cache key even for providers
    without a seed so that replicates are never served one cached answer.
    """

    messages: tuple[Message, ...] = Field(min_length=1)
    tools: tuple[ToolSpec, ...] = ()
    tool_choice: ToolChoice | None = None
    max_tokens: int = Field(gt=0)
    temperature: float | None = None
    top_p: float | None = None
    stop: tuple[str, ...] = ()
    seed: int | None = None
    replicate: int = 0
    extra: dict[str, JsonValue] = Field(default_factory=dict)
    """Further provider generation parameters, sent as-is and part of the cache key; an
    output limit given here is folded into `max_tokens` (see `OUTPUT_LIMIT_KEYS`)."""

    @model_validator(mode="before")
    @classmethod
    def _fold_output_limits(cls, data: Any) -> Any:
        """Output limits in `extra` become `max_tokens`, the one limit priced and sent.

        Sent as-is they would raise the wire's limit past the budget's worst case; folded,
        the request records (and the wire carries) the effective limit. `n` other than 1
        is refused: the harness reads one choice, and the others would be billed unseen.
        """
        if not isinstance(data, dict) or not isinstance(data.get("extra"), dict):
            return data
        extra = dict(data["extra"])
        limits: list[int] = []
        for key in OUTPUT_LIMIT_KEYS:
            if key in extra:
                value = extra.pop(key)
                if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                    raise ValueError(f"extra[{key!r}] must be a positive integer, got {value!r}")
                limits.append(value)
        for key, why in REFUSED_EXTRA_KEYS.items():
            if key in extra:
                raise ValueError(f"extra[{key!r}] is not allowed: {why}")
        choices = extra.get("n", 1)
        if choices != 1:
            raise ValueError(
                f"extra['n'] must be 1 (one choice is read and priced), got {choices!r}"
            )
        if not limits:
            return data
        folded = dict(data)
        folded["extra"] = extra
        current = folded.get("max_tokens")
        if isinstance(current, int) and not isinstance(current, bool):
            limits.append(current)
        folded["max_tokens"] = max(limits)
        return folded

    def tool(self, name: str) -> ToolSpec | None:
        """The offered tool called `name`, if any."""
        for spec in self.tools:
            if spec.name == name:
                return spec
        return None


class Usage(FrozenRecord):
    """Token usage the provider reported for one reply.

    `input_tokens` are plain (uncached) input tokens; cache reads and writes are apart.
    """

    input_tokens: int
    output_tokens: int
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0


BodyProblem = Literal[
    "empty_body", "malformed_json", "not_an_object", "no_choices", "no_content", "empty_reply"
]


class ModelResponse(FrozenRecord):
    """A reply read from a 200 body. `body_problem` says why nothing usable is in it."""

    text: str | None = None
    tool_calls: tuple[ToolCall, ...] = ()
    stop_kind: StopKind | None = None
    finish_reason: str | None = None
    usage: Usage | None = None
    response_id: str | None = None
    reported_model: str | None = None
    body_problem: BodyProblem | None = None

    @property
    def truncated(self) -> bool:
        """The stop reason says the reply was cut off (OpenAI `length`, Anthropic `max_tokens`)."""
        return self.stop_kind == "max_tokens"


class Actionable(FrozenRecord):
    """Text and tool calls that may be acted on: only ever built from a complete reply."""

    text: str | None
    tool_calls: tuple[ToolCall, ...]


def actionable(response: ModelResponse) -> Actionable:
    """The reply's text and tool calls to act on; refuses a reply that was cut off.

    Keyed off the stop reason alone: a cut-off prefix that happens to parse as valid JSON
    (a partial payout batch) is refused like any other truncated reply.
    """
    if response.truncated:
        raise TruncatedReplyError(
            f"reply stopped with {response.finish_reason!r} (cut off at max_tokens): its "
            f"{len(response.tool_calls)} tool call(s) and text must not be acted on"
        )
    return Actionable(text=response.text, tool_calls=response.tool_calls)
