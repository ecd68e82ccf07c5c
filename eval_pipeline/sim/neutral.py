"""The wire-neutral request a profile reads and the outcome it returns.

Both wire formats (OpenAI Chat Completions, Anthropic Messages) are parsed into a
:class:`SimRequest`; a profile answers with an :data:`Outcome` and the server renders it
back into the format the request came in. These are frozen slotted dataclasses rather
than pydantic records because they are built on every request of the hot path and never
leave the server process; the records that do (the bill) are :class:`FrozenRecord`.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

WireFormat = Literal["openai", "anthropic"]
StopKind = Literal["end", "tool_use", "max_tokens"]
ToolChoiceMode = Literal["auto", "none", "required", "tool"]

ARGUMENTS_ENCODER = json.JSONEncoder(ensure_ascii=False)
"""How tool-call arguments are written: ``{"key": "value"}`` with spaces, like the APIs."""


def stable_unit(*parts: object) -> float:
    """A number in [0, 1) that depends only on ``parts`` (their ``str``), never on the process."""
    key = "\x1f".join(str(p) for p in parts).encode()
    digest = hashlib.blake2b(key, digest_size=8).digest()
    return int.from_bytes(digest, "big") / 2.0**64


def stable_index(n: int, *parts: object) -> int:
    """An index in ``range(n)`` that depends only on ``parts``."""
    if n <= 0:
        raise ValueError("stable_index needs n > 0")
    return min(int(stable_unit(*parts) * n), n - 1)


@dataclass(frozen=True, slots=True)
class SimToolCall:
    """A tool call: ``arguments`` is the JSON text as the model wrote it (may be invalid).

    ``id`` empty means the server assigns a deterministic id derived from the request.
    """

    name: str
    arguments: str
    id: str = ""

    @classmethod
    def of(cls, name: str, arguments: Mapping[str, Any]) -> SimToolCall:
        """A well-formed call whose arguments are the JSON encoding of ``arguments``."""
        return cls(name=name, arguments=ARGUMENTS_ENCODER.encode(arguments))


@dataclass(frozen=True, slots=True)
class SimToolResult:
    """The result of one tool call, sent back by the client."""

    call_id: str
    text: str
    is_error: bool = False


@dataclass(frozen=True, slots=True)
class SimMessage:
    """One conversation turn. OpenAI ``tool`` messages become a user turn carrying results,
    as in the Anthropic format, so a profile sees one shape."""

    role: Literal["user", "assistant"]
    text: str = ""
    tool_calls: tuple[SimToolCall, ...] = ()
    tool_results: tuple[SimToolResult, ...] = ()


@dataclass(frozen=True, slots=True)
class SimTool:
    """A tool offered by the client, with the JSON schema of its arguments object."""

    name: str
    description: str
    input_schema: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class SimToolChoice:
    """``auto`` (default), ``none``, ``required`` (OpenAI) / ``any`` (Anthropic), or ``tool``
    with the forced tool's ``name``."""

    mode: ToolChoiceMode = "auto"
    name: str | None = None


@dataclass(frozen=True, slots=True)
class SimRequest:
    """A parsed model request, independent of the wire format it came in.

    ``occurrence`` is how many times this exact request (body bytes, plus the
    ``x-evalp-seed`` header) was seen before by this server process: 0 the first time.
    ``body_digest`` is a hex digest of the same key. ``max_tokens`` is ``None`` only when an
    OpenAI request set neither ``max_tokens`` nor ``max_completion_tokens``.
    """

    wire_format: WireFormat
    model: str
    profile: str
    variant: str | None
    system: str
    messages: tuple[SimMessage, ...]
    tools: tuple[SimTool, ...]
    tool_choice: SimToolChoice
    max_tokens: int | None
    temperature: float | None
    replicate_seed: int | None
    occurrence: int
    server_seed: int
    body_digest: str

    @property
    def last_message(self) -> SimMessage | None:
        return self.messages[-1] if self.messages else None

    def last_user_text(self) -> str:
        """Text of the last user turn that has text ("" if none)."""
        for message in reversed(self.messages):
            if message.role == "user" and message.text:
                return message.text
        return ""

    def has_tool_result(self) -> bool:
        return any(m.tool_results for m in self.messages)

    def tool(self, name: str) -> SimTool | None:
        for tool in self.tools:
            if tool.name == name:
                return tool
        return None

    def unit(self, *labels: object, per_occurrence: bool = False) -> float:
        """A deterministic draw in [0, 1) for this request (server seed, body, replicate seed
        and, if ``per_occurrence``, the occurrence count), separated by ``labels``."""
        occurrence = self.occurrence if per_occurrence else -1
        return stable_unit(
            self.server_seed, self.body_digest, self.replicate_seed, occurrence, *labels
        )

    def pick(self, n: int, *labels: object, per_occurrence: bool = False) -> int:
        """A deterministic index in ``range(n)`` for this request."""
        return min(int(self.unit(*labels, per_occurrence=per_occurrence) * n), n - 1)


@dataclass(frozen=True, slots=True)
class Reply:
    """A 200 reply. ``text_blocks`` empty means no text (OpenAI ``content: null``); each
    block is one Anthropic text block, joined into one string for OpenAI.

    ``input_tokens``/``output_tokens`` override the simulator's own count (see
    :mod:`eval_pipeline.sim.tokens`) when a profile wants to report other usage; a reply
    whose output exceeds the request's ``max_tokens`` is still cut by the server.
    ``input_tokens`` is every prompt token; ``cache_read_tokens``/``cache_write_tokens`` of
    them are reported (and billed) as prompt-cache reads and writes — the Anthropic format
    reports both, the OpenAI format only reads (a write is plain input there).
    ``delay_ms`` holds the reply back that long after the request was billed (a reply
    slower than the client's timeout).
    """

    text_blocks: tuple[str, ...] = ()
    tool_calls: tuple[SimToolCall, ...] = ()
    stop: StopKind = "end"
    input_tokens: int | None = None
    output_tokens: int | None = None
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    delay_ms: int = 0

    @classmethod
    def of_text(cls, text: str, stop: StopKind = "end") -> Reply:
        return cls(text_blocks=(text,), stop=stop)

    @property
    def text(self) -> str | None:
        return "".join(self.text_blocks) if self.text_blocks else None


@dataclass(frozen=True, slots=True)
class ErrorStatus:
    """An HTTP error with a provider-shaped error body (shape chosen by the wire format).

    ``retry_after_s`` sets ``Retry-After`` (integer seconds) and ``retry_after_ms`` sets
    ``retry-after-ms``; ``error_type``/``code`` override the defaults for the status.
    """

    status: int
    message: str
    retry_after_s: int | None = None
    retry_after_ms: int | None = None
    error_type: str | None = None
    code: str | None = None
    headers: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True, slots=True)
class RawBody:
    """A response with exactly these bytes (empty body, malformed JSON, ``{}``). Not billed."""

    status: int = 200
    body: bytes = b""
    content_type: str = "application/json"


@dataclass(frozen=True, slots=True)
class ConnectionDrop:
    """Close the TCP connection without sending any response."""


Outcome = Reply | ErrorStatus | RawBody | ConnectionDrop
