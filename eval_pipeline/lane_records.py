"""What a lane run leaves behind: one outcome per case and attempt, and its trace events.

Both are frozen records journaled as they happen and loaded into the warehouse
(`runs.case_runs`, `runs.trace_events`) beside `runs.call_envelopes`, keyed by run, lane,
model, seed, case and turn, so scoring can check mechanically which tools ran with which
arguments, what they returned, what was submitted and whether a refused query was tried.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any, Literal

from eval_pipeline.records import FrozenRecord

CASE_RUNS = "runs.case_runs"
TRACE_EVENTS = "runs.trace_events"
CASE_OUTCOMES = "runs.case_outcomes"
"""The latest attempt of each case (a view over `runs.case_runs`): what scoring reads."""
LANE_IDENTITIES = "runs.lane_identities"

Lane = Literal["model", "product"]
LANES: tuple[Lane, ...] = ("model", "product")

CaseStatus = Literal["completed", "infra_error", "harness_error", "budget_stopped"]
"""completed: the model was heard to the end of its turn (`end_reason` says how it ended);
infra_error (‡), harness_error, budget_stopped (†): a call never reached the model or never
came back, so the case says nothing about the model and is never scored as a zero."""

EndReason = Literal[
    "final_answer",
    "first_action",
    "stalled",
    "asked_user",
    "iteration_cap",
    "truncated",
    "empty_reply",
    "call_failed",
]

TraceKind = Literal["model_reply", "tool_call", "tool_result", "guard", "write", "final"]


class FirstCall(FrozenRecord):
    """The model lane's observation: the first tool call the model emitted."""

    name: str
    arguments: str
    """The arguments as the model wrote them (raw JSON text)."""
    parsed: bool
    matches_expected: bool | None
    """Name and listed arguments equal the case's expected first call, as structures;
    None when the case expects none. Arguments that do not parse never match."""


class CaseRun(FrozenRecord):
    """One case run once (an `attempt`) in one lane, for one model and seed."""

    run_id: str
    lane: Lane
    model: str
    seed: int
    case_id: str
    attempt: int
    fixture_id: str
    settings_hash: str
    """Everything that shapes the run besides model and seed: lane, guards, caps."""
    status: CaseStatus
    end_reason: EndReason
    final_text: str | None
    """The reply text the answer is read from (the last reply of the turn)."""
    turns: int
    tool_calls: int
    guard_firings: dict[str, int]
    call_ids: tuple[str, ...]
    cost_usd: Decimal
    input_tokens: int
    output_tokens: int
    first_call: FirstCall | None = None
    elapsed_ms: float
    started_at: str


class TraceEvent(FrozenRecord):
    """One step of a case's conversation, in order (`seq`) within its attempt."""

    event_id: str
    run_id: str
    lane: Lane
    model: str
    seed: int
    case_id: str
    attempt: int
    turn: int
    seq: int
    kind: TraceKind
    tool: str | None = None
    data: dict[str, Any]


class LaneIdentity(FrozenRecord):
    """What a `settings_hash` stands for: the lane settings, the model config and the
    fixture set a partition's case runs were made under (the params a published number
    is logged with)."""

    settings_hash: str
    lane: Lane
    model: str
    fixture_id: str
    settings: dict[str, Any]
    """`LaneSettings` as JSON (guards, caps, concurrency)."""
    config: dict[str, Any]
    """The model config as loaded (names of key variables, never keys)."""
