"""What a world's tools are to the product lane: arguments read and checked against the
tool's schema, the world's handler run, every failure an agent can cause returned as an
error result the model can read and recover from (nothing an agent sends raises), and
write tools recorded in a dry-run sink instead of acting.

A world supplies a :class:`Toolbox` (``WorldPlugin.open_toolbox``) whose ``dispatch`` runs
its tools over the world-only agent database; the label world's is
``eval_pipeline.world.label.toolbox``.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from collections.abc import Sequence
from typing import Any

from eval_pipeline.cases.schema_check import schema_problem
from eval_pipeline.providers.types import ToolSpec
from eval_pipeline.records import FrozenRecord

MAX_ARGUMENT_BYTES = 64_000
"""Arguments larger than this are refused unread (a model sending megabytes of JSON)."""


class ToolOutcome(FrozenRecord):
    """What a tool call returned to the model, and what the trace needs to know about it."""

    name: str
    arguments: dict[str, Any] | None
    """The arguments as executed (None when they could not be read)."""
    text: str
    is_error: bool
    error_kind: str | None = None
    """unknown_tool | bad_arguments | sql_refused | sql_error | sql_timeout | sql_limit |
    not_found"""
    write: dict[str, Any] | None = None
    """The request a write tool recorded in the dry-run sink."""
    elapsed_ms: float = 0.0


def tool_json(value: Any) -> str:
    """A tool result's text: compact JSON (exact decimals as strings)."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)


def tool_error(name: str, arguments: dict[str, Any] | None, kind: str, reason: str) -> ToolOutcome:
    return ToolOutcome(
        name=name,
        arguments=arguments,
        text=tool_json({"error": reason}),
        is_error=True,
        error_kind=kind,
    )


class ToolNotFoundError(Exception):
    """A lookup found nothing: becomes a `not_found` error result."""


class Toolbox:
    """A world's tools for one lane run (thread-safe: a world's handlers must be too)."""

    def __init__(self, specs: Sequence[ToolSpec]) -> None:
        self.specs = {spec.name: spec for spec in specs}
        self.writes: list[dict[str, Any]] = []
        self._lock = threading.Lock()

    def close(self) -> None:
        """Release what the world's tools hold open (connections, workers)."""

    def __enter__(self) -> Toolbox:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    def dispatch(self, name: str, arguments: dict[str, Any]) -> ToolOutcome:
        """Run the world's tool `name` on arguments already checked against its schema;
        raises ToolNotFoundError when a lookup finds nothing."""
        raise NotImplementedError(f"{type(self).__name__} runs no tools")

    def execute(self, name: str, raw_arguments: str) -> ToolOutcome:
        """Run one tool call as the model sent it; every failure is an error result."""
        arguments, refused = self.read(name, raw_arguments)
        if refused is not None:
            return refused
        assert arguments is not None
        return self.run(name, arguments)

    def read(
        self, name: str, raw_arguments: str
    ) -> tuple[dict[str, Any] | None, ToolOutcome | None]:
        """The arguments of a call read and checked against the tool's schema, or the error
        result to send back instead (unknown tool, oversized, not JSON, off the schema)."""
        spec = self.specs.get(name)
        if spec is None:
            known = ", ".join(sorted(self.specs))
            return None, tool_error(
                name, None, "unknown_tool", f"no tool named {name!r}; tools: {known}"
            )
        if len(raw_arguments.encode("utf-8")) > MAX_ARGUMENT_BYTES:
            reason = f"arguments over {MAX_ARGUMENT_BYTES} bytes refused"
            return None, tool_error(name, None, "bad_arguments", reason)
        try:
            arguments = json.loads(raw_arguments or "{}")
        except ValueError as error:
            return None, tool_error(
                name, None, "bad_arguments", f"arguments are not valid JSON: {error}"
            )
        if not isinstance(arguments, dict):
            return None, tool_error(name, None, "bad_arguments", "arguments must be a JSON object")
        problem = schema_problem(arguments, spec.input_schema)
        if problem:
            reason = f"arguments break the schema: {problem}"
            return None, tool_error(name, arguments, "bad_arguments", reason)
        return arguments, None

    def run(self, name: str, arguments: dict[str, Any]) -> ToolOutcome:
        """Run a tool on arguments already read and checked against its schema."""
        started = time.perf_counter()
        try:
            outcome = self.dispatch(name, arguments)
        except ToolNotFoundError as missing:
            outcome = tool_error(name, arguments, "not_found", str(missing))
        return outcome.model_copy(update={"elapsed_ms": (time.perf_counter() - started) * 1000})

    def dry_run(
        self, name: str, arguments: dict[str, Any], reply: dict[str, Any] | None = None
    ) -> ToolOutcome:
        """A write tool's call kept in the dry-run sink and answered with a synthetic
        success: `reply` (its text values with `{request_id}` filled in) or a request id
        and `accepted`. Nothing is sent anywhere."""
        digest = hashlib.sha256(tool_json([name, arguments]).encode()).hexdigest()[:12]
        request_id = f"DRYRUN-{digest}"
        record = {"tool": name, "request_id": request_id, **arguments}
        self.record_write(record)
        body = (
            {"request_id": request_id, "status": "accepted"}
            if reply is None
            else {
                key: value.replace("{request_id}", request_id) if isinstance(value, str) else value
                for key, value in reply.items()
            }
        )
        return ToolOutcome(
            name=name, arguments=arguments, text=tool_json(body), is_error=False, write=record
        )

    def record_write(self, record: dict[str, Any]) -> None:
        """Keep a write tool's request in the dry-run sink (nothing changes in the world)."""
        with self._lock:
            self.writes.append(record)
