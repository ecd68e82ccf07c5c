"""Running one case in a lane: the model lane's single call and the product lane's agent loop.

Both lanes send the same system prompt, the case's prompt and the same tool schemas (the
ones frozen with the fixture set); both record every call's envelope through the
model-call layer and every step as a :class:`TraceEvent`, and end with one
:class:`CaseRun`. Neither grades: the answer is read later, from what was stored.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any, Literal

from eval_pipeline.cases.case import Case
from eval_pipeline.cases.frozen import FixtureSet
from eval_pipeline.cases.readers import reader_for
from eval_pipeline.lane_records import (
    CaseRun,
    CaseStatus,
    EndReason,
    FirstCall,
    Lane,
    TraceEvent,
    TraceKind,
)
from eval_pipeline.lanes.guards import GuardSettings, repair_arguments
from eval_pipeline.lanes.toolbox import Toolbox, ToolOutcome
from eval_pipeline.providers.errors import TruncatedReplyError
from eval_pipeline.providers.harness import CallResult, CallTag, ModelClient
from eval_pipeline.providers.types import (
    Message,
    ModelRequest,
    ModelResponse,
    ToolCall,
    ToolSpec,
    actionable,
)
from eval_pipeline.world import plugin_of_world

STALL_NUDGE = (
    "Carry on: take the next step yourself, or give your final answer in the format asked."
)
TRUNCATION_NUDGE = (
    "Your last reply was cut off at the output limit, so none of it was acted on. Send it "
    "again, shorter."
)
MAX_TOKENS = 1024

_FINAL_LINE = re.compile(r"^\W*(ANSWER|ABSTAIN)\W*:", re.MULTILINE | re.IGNORECASE)
_REFUSAL = re.compile(
    r"^\s*(I can(no|')t|I won't|I will not|I'm unable|I am unable|I must decline)", re.IGNORECASE
)

TextTurn = Literal["final", "question", "refusal", "stall"]


def text_turn(text: str | None) -> TextTurn:
    """What a reply without tool calls is: a final answer (an ANSWER/ABSTAIN line), a
    question to the user, a refusal, or a stall (announcing a step without taking it)."""
    body = (text or "").strip()
    if _FINAL_LINE.search(body):
        return "final"
    if _REFUSAL.search(body):
        return "refusal"
    if body.endswith("?"):
        return "question"
    return "stall"


def first_call_matches(call: ToolCall, case: Case) -> tuple[bool, bool | None]:
    """(arguments parsed, matches the expected first call); the match compares the name and
    every listed argument as a JSON structure (key order, spacing, 3 vs 3.0 do not matter)."""
    try:
        arguments = call.parsed_arguments()
    except ValueError:
        return False, False if case.expected_first_call is not None else None
    expected = case.expected_first_call
    if expected is None:
        return True, None
    if call.name != expected.name or not isinstance(arguments, dict):
        return True, False
    return True, all(
        key in arguments and arguments[key] == value for key, value in expected.arguments.items()
    )


@dataclass
class CaseContext:
    """One case in one lane run: who runs it, and where its records go."""

    run_id: str
    lane: Lane
    model: str
    seed: int
    case: Case
    attempt: int
    fixture_id: str
    settings_hash: str
    tools: tuple[ToolSpec, ...]
    client: ModelClient
    emit: Callable[[TraceEvent], None]
    system_prompt: str
    """The world's (`WorldPlugin.system_prompt`), the same in both lanes."""
    execute: Callable[[str, dict[str, Any]], ToolOutcome] | None = None
    """Runs a tool on arguments already read (product lane only)."""
    read_arguments: (
        Callable[[str, str], tuple[dict[str, Any] | None, ToolOutcome | None]] | None
    ) = None
    """Reads raw arguments for a tool: (arguments, None) or (None, error outcome)."""
    guards: GuardSettings = field(default_factory=GuardSettings)
    max_tokens: int = MAX_TOKENS
    _seq: int = 0
    _results: list[CallResult] = field(default_factory=list)
    _firings: Counter[str] = field(default_factory=Counter)
    _started: float = field(default_factory=time.perf_counter)
    _started_at: str = field(default_factory=lambda: datetime.now(UTC).isoformat())

    def trace(
        self, turn: int, kind: TraceKind, data: dict[str, Any], tool: str | None = None
    ) -> None:
        self._seq += 1
        self.emit(
            TraceEvent(
                event_id=f"{self.run_id}/{self.case.case_id}/{self.attempt}/{self._seq}",
                run_id=self.run_id,
                lane=self.lane,
                model=self.model,
                seed=self.seed,
                case_id=self.case.case_id,
                attempt=self.attempt,
                turn=turn,
                seq=self._seq,
                kind=kind,
                tool=tool,
                data=data,
            )
        )

    def guard(self, turn: int, name: str, action: str, **detail: Any) -> None:
        self._firings[name] += 1
        self.trace(turn, "guard", {"guard": name, "action": action, **detail})

    def request(self, messages: Sequence[Message]) -> ModelRequest:
        return case_request(messages, self.tools, self.max_tokens, self.seed)

    async def call(self, messages: Sequence[Message], turn: int) -> CallResult:
        result = await self.client.call(
            self.request(messages),
            CallTag(lane=self.lane, case_id=self.case.case_id, turn=turn),
            read_answer=reader_for(self.case),
        )
        self._results.append(result)
        response = result.response
        self.trace(
            turn,
            "model_reply",
            {
                "call_id": result.call_id,
                "status": result.status,
                "label": result.label.label,
                "stop_kind": response.stop_kind if response else None,
                "text": response.text if response else None,
                "tool_calls": [
                    {"name": c.name, "arguments": c.arguments} for c in response.tool_calls
                ]
                if response
                else [],
            },
        )
        return result

    def finish(
        self,
        status: CaseStatus,
        end_reason: EndReason,
        final_text: str | None,
        turns: int,
        tool_calls: int,
        first_call: FirstCall | None = None,
    ) -> CaseRun:
        self.trace(turns, "final", {"status": status, "end_reason": end_reason, "text": final_text})
        envelopes = [e for r in self._results for e in r.envelopes]
        return CaseRun(
            run_id=self.run_id,
            lane=self.lane,
            model=self.model,
            seed=self.seed,
            case_id=self.case.case_id,
            attempt=self.attempt,
            fixture_id=self.fixture_id,
            settings_hash=self.settings_hash,
            status=status,
            end_reason=end_reason,
            final_text=final_text,
            turns=turns,
            tool_calls=tool_calls,
            guard_firings=dict(self._firings),
            call_ids=tuple(r.call_id for r in self._results),
            cost_usd=sum((e.cost_usd or Decimal(0) for e in envelopes), Decimal(0)),
            input_tokens=sum(e.input_tokens or 0 for e in envelopes),
            output_tokens=sum(e.output_tokens or 0 for e in envelopes),
            first_call=first_call,
            elapsed_ms=(time.perf_counter() - self._started) * 1000,
            started_at=self._started_at,
        )


def case_request(
    messages: Sequence[Message], tools: tuple[ToolSpec, ...], max_tokens: int, seed: int
) -> ModelRequest:
    """A lane's request: the seed is sent as the provider's seed and as the replicate."""
    return ModelRequest(
        messages=tuple(messages),
        tools=tools,
        max_tokens=max_tokens,
        seed=seed,
        replicate=seed,
    )


def system_prompt(fixture_set: FixtureSet) -> str:
    """The system prompt of the world a fixture set was frozen from."""
    return plugin_of_world(fixture_set.manifest.world.plugin).system_prompt


def open_toolbox(fixture_set: FixtureSet, agent_db: Path) -> Toolbox:
    """The tools of the world a fixture set was frozen from, over its agent database."""
    return plugin_of_world(fixture_set.manifest.world.plugin).open_toolbox(agent_db)


def opening(case: Case, system: str) -> list[Message]:
    """The first messages of a case in either lane."""
    return [
        Message(role="system", content=system),
        Message(role="user", content=case.prompt),
    ]


def _unheard(result: CallResult) -> CaseStatus | None:
    """The case status when the model was never heard on this call (‡, †, harness)."""
    if result.status == "infra_error":
        return "infra_error"
    if result.status == "budget_stopped":
        return "budget_stopped"
    if result.status == "harness_error":
        return "harness_error"
    return None


async def run_model_lane_case(ctx: CaseContext) -> CaseRun:
    """One call with the case's prompt and the tools; the first thing the model emits is
    the observation: its first tool call (compared with the expected one) or its text."""
    result = await ctx.call(opening(ctx.case, ctx.system_prompt), 0)
    unheard = _unheard(result)
    if unheard is not None:
        return ctx.finish(unheard, "call_failed", None, 1, 0)
    response = result.response
    assert response is not None
    if response.truncated:
        return ctx.finish("completed", "truncated", response.text, 1, 0)
    if response.tool_calls:
        call = response.tool_calls[0]
        parsed, matches = first_call_matches(call, ctx.case)
        first = FirstCall(
            name=call.name, arguments=call.arguments, parsed=parsed, matches_expected=matches
        )
        return ctx.finish("completed", "first_action", response.text, 1, 0, first_call=first)
    if response.body_problem is not None:
        return ctx.finish("completed", "empty_reply", None, 1, 0)
    return ctx.finish("completed", "first_action", response.text, 1, 0)


async def run_product_lane_case(ctx: CaseContext) -> CaseRun:
    """The agent loop: call, act on complete replies only, run tools, apply the guards."""
    assert ctx.execute is not None and ctx.read_arguments is not None
    messages = opening(ctx.case, ctx.system_prompt)
    tool_calls = 0
    bounced = False
    last_text: str | None = None
    for turn in range(ctx.guards.turn_limit):
        result = await ctx.call(messages, turn)
        unheard = _unheard(result)
        if unheard is not None:
            return ctx.finish(unheard, "call_failed", last_text, turn + 1, tool_calls)
        response = result.response
        assert response is not None
        if response.body_problem is not None and not response.truncated:
            return ctx.finish("completed", "empty_reply", last_text, turn + 1, tool_calls)
        try:
            act = actionable(response)
            text, calls = act.text, act.tool_calls
        except TruncatedReplyError as cut:
            if ctx.guards.truncation_refusal:
                ctx.guard(turn, "truncation_refusal", "asked to re-issue", detail=str(cut))
                messages += [_assistant(response), Message(role="user", content=TRUNCATION_NUDGE)]
                continue
            # Guard off: the harness acts on the cut-off reply as if it were whole, which is
            # exactly the behaviour whose cost the ablation measures.
            ctx.trace(turn, "guard", {"guard": "truncation_refusal", "action": "off: acted on it"})
            text, calls = response.text, response.tool_calls
        last_text = text
        if calls:
            messages.append(_assistant(response))
            for call in calls:
                tool_calls += 1
                messages.append(await _run_tool(ctx, turn, call))
            continue
        kind = text_turn(text)
        if kind in ("final", "refusal"):
            return ctx.finish("completed", "final_answer", text, turn + 1, tool_calls)
        if kind == "question":
            return ctx.finish("completed", "asked_user", text, turn + 1, tool_calls)
        if ctx.guards.stall_bounce and not bounced:
            bounced = True
            ctx.guard(turn, "stall_bounce", "nudged")
            messages += [_assistant(response), Message(role="user", content=STALL_NUDGE)]
            continue
        return ctx.finish("completed", "stalled", text, turn + 1, tool_calls)
    turns = ctx.guards.turn_limit
    if ctx.guards.iteration_cap:
        ctx.guard(turns, "iteration_cap", "ended the turn", limit=turns)
    return ctx.finish("completed", "iteration_cap", last_text, turns, tool_calls)


def _assistant(response: ModelResponse) -> Message:
    return Message(role="assistant", content=response.text or "", tool_calls=response.tool_calls)


async def _run_tool(ctx: CaseContext, turn: int, call: ToolCall) -> Message:
    """Read, maybe repair, run and trace one tool call; the result message for the model.
    The tool runs in a worker thread: a world's tools are its own work (a query, the
    calculator), and the other cases' calls go on while it runs."""
    assert ctx.execute is not None and ctx.read_arguments is not None
    arguments, refused = ctx.read_arguments(call.name, call.arguments)
    repairs: tuple[str, ...] = ()
    if (
        refused is not None
        and ctx.guards.argument_repair
        and _raw_object(call.arguments) is not None
    ):
        spec = next((t for t in ctx.tools if t.name == call.name), None)
        if spec is not None:
            repaired, repairs = repair_arguments(_raw_object(call.arguments), spec.input_schema)
            if repairs:
                arguments, refused = ctx.read_arguments(call.name, json.dumps(repaired))
                ctx.guard(
                    turn,
                    "argument_repair",
                    "repaired" if refused is None else "could not repair",
                    repairs=list(repairs),
                )
    ctx.trace(
        turn,
        "tool_call",
        {
            "call_id": call.id,
            "raw_arguments": call.arguments,
            "arguments": arguments,
            "repairs": list(repairs),
        },
        tool=call.name,
    )
    outcome = (
        refused
        if refused is not None
        else await asyncio.to_thread(ctx.execute, call.name, arguments or {})
    )
    ctx.trace(
        turn,
        "tool_result",
        {
            "call_id": call.id,
            "is_error": outcome.is_error,
            "error_kind": outcome.error_kind,
            "text": outcome.text,
            "elapsed_ms": round(outcome.elapsed_ms, 3),
        },
        tool=call.name,
    )
    if outcome.write is not None:
        # Only a workflow case (one that expects a payout batch) may write at all.
        allowed = ctx.case.expected_payload is not None
        ctx.trace(
            turn,
            "write",
            {"call_id": call.id, "request": outcome.write, "allowed": allowed},
            tool=call.name,
        )
    return Message(
        role="tool", content=outcome.text, tool_call_id=call.id, is_error=outcome.is_error
    )


def _raw_object(raw: str) -> dict[str, Any] | None:
    try:
        value = json.loads(raw or "{}")
    except ValueError:
        return None
    return value if isinstance(value, dict) else None
