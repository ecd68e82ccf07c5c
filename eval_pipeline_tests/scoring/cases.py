"""Cases and case runs built by hand for the scoring tests."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from eval_pipeline.cases.case import AnswerKind, Case, Tier
from eval_pipeline.lane_records import CaseRun, CaseStatus, EndReason, Lane
from eval_pipeline.scoring.score import CaseScore
from eval_pipeline.world.label.versions import Category

CENTS = "End with one line: ANSWER: $<amount in USD, to the cent>"
ABSTAIN_NOTE = (
    "If the records cannot answer this, say so with a line ABSTAIN: <reason> instead of guessing."
)


def make_case(
    *,
    kind: AnswerKind = "money",
    expected: str = "368.41",
    category: Category = "royalty_math",
    question: str = "What is it?",
    contract: str = CENTS,
    tiers: tuple[Tier, ...] = ("exact", "trace"),
    checks: tuple[str, ...] = (),
    params: dict[str, str] | None = None,
    case_id: str = "case-001",
    core: bool = False,
    **extra: Any,
) -> Case:
    return Case(
        case_id=case_id,
        category=category,
        prompt=f"{question}\n{ABSTAIN_NOTE}\n{contract}",
        answer_kind=kind,
        expected=expected,
        tiers=tiers,
        trace_checks=checks,
        expected_first_call=None,
        template="t",
        resolver="r",
        params=params or {},
        core=core,
        **extra,
    )


def make_run(
    case: Case,
    final_text: str | None,
    *,
    lane: Lane = "product",
    seed: int = 0,
    status: CaseStatus = "completed",
    end_reason: EndReason = "final_answer",
) -> CaseRun:
    return CaseRun(
        run_id="run-1",
        lane=lane,
        model="m",
        seed=seed,
        case_id=case.case_id,
        attempt=1,
        fixture_id="fx-test",
        settings_hash="s",
        status=status,
        end_reason=end_reason,
        final_text=final_text,
        turns=1,
        tool_calls=0,
        guard_firings={},
        call_ids=("call-1",),
        cost_usd=Decimal("0.001"),
        input_tokens=10,
        output_tokens=5,
        elapsed_ms=1.0,
        started_at="2026-11-30T00:00:00",
    )


def case_score(
    model: str,
    case: int,
    value: float | None,
    *,
    category: str = "royalty_math",
    status: str | None = None,
    seed: int = 0,
    lane: Lane = "product",
) -> CaseScore:
    """A stored case score for case `c<case>`; with no status, `scored`, or `infra_error`
    for a value of None."""
    return CaseScore(
        lane=lane,
        model=model,
        seed=seed,
        case_id=f"c{case:03d}",
        category=category,
        core=False,
        attempt=1,
        run_id="r",
        fixture_id="fx-unit",
        settings_hash="h",
        status=status or ("scored" if value is not None else "infra_error"),  # type: ignore[arg-type]
        exact=value,
        trace=None,
        judged=None,
        score=value,
        failed_checks=(),
        security_violation=False,
        answer=None,
        reason="",
        label=None if value is None else ("right" if value >= 0.5 else "wrong"),
        cost_usd=Decimal(0),
        tokens=0,
    )
