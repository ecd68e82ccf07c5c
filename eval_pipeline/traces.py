"""A case's recorded trace as a trace check reads it, and what a check gives back.

The contract between the pipeline's own checks (`scoring.trace_checks`) and the checks a
world plugin registers (`WorldRegistration.trace_checks`): below both, so that a world
needs nothing of scoring to write one.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from eval_pipeline.cases.case import SQL_TOOL, Case
from eval_pipeline.lane_records import TraceEvent
from eval_pipeline.records import FrozenRecord


class CheckResult(FrozenRecord):
    name: str
    passed: bool
    reason: str


@dataclass(frozen=True)
class Trace:
    """One case's trace, with the views the checks read."""

    case: Case
    events: Sequence[TraceEvent]
    answer: str | None
    """The final answer's canonical value (money as a Decimal string), if any."""

    def tool_results(self, tool: str) -> list[tuple[dict[str, Any], dict[str, Any]]]:
        """(executed arguments, parsed result) of every successful call of `tool`."""
        calls: dict[str, dict[str, Any]] = {}
        out = []
        for event in self.events:
            if event.tool != tool:
                continue
            if event.kind == "tool_call":
                calls[str(event.data.get("call_id"))] = event.data.get("arguments") or {}
            elif event.kind == "tool_result" and not event.data.get("is_error"):
                try:
                    body = json.loads(str(event.data.get("text") or "{}"))
                except ValueError:
                    continue
                out.append((calls.get(str(event.data.get("call_id")), {}), body))
        return out

    def attempted_queries(self) -> list[str]:
        return [
            str(
                (event.data.get("arguments") or {}).get("query")
                or json.loads(event.data.get("raw_arguments") or "{}").get("query", "")
            )
            for event in self.events
            if event.kind == "tool_call" and event.tool == SQL_TOOL
        ]

    def writes(self) -> list[dict[str, Any]]:
        return [dict(event.data) for event in self.events if event.kind == "write"]

    def submitted_requests(self) -> list[dict[str, Any]]:
        """The requests the run's write tools recorded in the dry-run sink, in order."""
        return [dict(write.get("request") or {}) for write in self.writes()]


Check = Callable[[Trace], CheckResult]
