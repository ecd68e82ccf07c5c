"""Building product-lane traces by hand, in the shape the agent loop stores them."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from eval_pipeline.lane_records import TraceEvent, TraceKind
from eval_pipeline.world.label import tools


@dataclass
class TraceBuilder:
    case_id: str = "case-001"
    events: list[TraceEvent] = field(default_factory=list)
    turn: int = 0

    def _add(self, kind: TraceKind, data: dict[str, Any], tool: str | None = None) -> None:
        self.events.append(
            TraceEvent(
                event_id=f"e{len(self.events)}",
                run_id="run-1",
                lane="product",
                model="m",
                seed=0,
                case_id=self.case_id,
                attempt=1,
                turn=self.turn,
                seq=len(self.events),
                kind=kind,
                tool=tool,
                data=data,
            )
        )

    def call(
        self,
        tool: str,
        arguments: dict[str, Any],
        result: dict[str, Any] | None = None,
        *,
        error_kind: str | None = None,
        stop_kind: str = "tool_use",
    ) -> TraceBuilder:
        """One model reply calling `tool`, the call, and its result (or error)."""
        call_id = f"c{len(self.events)}"
        raw = json.dumps(arguments)
        self._add(
            "model_reply",
            {
                "call_id": f"r{call_id}",
                "status": "ok",
                "label": None,
                "stop_kind": stop_kind,
                "text": None,
                "tool_calls": [{"name": tool, "arguments": raw}],
            },
        )
        self._add(
            "tool_call",
            {"call_id": call_id, "raw_arguments": raw, "arguments": arguments, "repairs": []},
            tool,
        )
        self._add(
            "tool_result",
            {
                "call_id": call_id,
                "is_error": error_kind is not None,
                "error_kind": error_kind,
                "text": json.dumps(result if error_kind is None else {"error": error_kind}),
                "elapsed_ms": 1.0,
            },
            tool,
        )
        if tool == tools.SUBMIT_PAYOUT_BATCH and error_kind is None:
            self._add("write", {"call_id": call_id, "request": arguments, "allowed": False}, tool)
        self.turn += 1
        return self

    def final(self, text: str) -> TraceBuilder:
        self._add(
            "model_reply",
            {
                "call_id": "rfinal",
                "status": "ok",
                "label": None,
                "stop_kind": "end",
                "text": text,
                "tool_calls": [],
            },
        )
        self._add("final", {"status": "completed", "end_reason": "final_answer", "text": text})
        return self
