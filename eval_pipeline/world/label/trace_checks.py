"""The label world's trace checks (tier 2), registered through its entry point beside the
pipeline's own (`eval_pipeline.scoring.trace_checks.CHECKS`): amounts that came from the
calculator, the clause a question cites read, the payout batch the case expects (or none).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from decimal import ROUND_HALF_EVEN, Decimal, InvalidOperation
from typing import Any

from eval_pipeline.traces import Check, CheckResult, Trace
from eval_pipeline.world.label import tools

TRACE_MONEY_FROM_CALCULATOR = "money_from_calculator"
TRACE_CITED_CLAUSE_READ = "cited_clause_read"
TRACE_SINGLE_BATCH_SUBMITTED = "single_batch_submitted"
TRACE_NO_BATCH_SUBMITTED = "no_batch_submitted"
CENT = Decimal("0.01")


def _money_values(value: Any) -> Iterable[Decimal]:
    """Every decimal-looking string in a tool result (the calculator's amounts)."""
    if isinstance(value, dict):
        for item in value.values():
            yield from _money_values(item)
    elif isinstance(value, list):
        for item in value:
            yield from _money_values(item)
    elif isinstance(value, str) and re.fullmatch(r"-?\d+\.\d+", value):
        try:
            yield Decimal(value)
        except InvalidOperation:
            return


def money_from_calculator(trace: Trace) -> CheckResult:
    """The answered amount is one the calculator returned in this case's run; for a payout
    run, every submitted amount is, and the answer is their total."""
    name = TRACE_MONEY_FROM_CALCULATOR
    if trace.answer is None:
        return CheckResult(name=name, passed=False, reason="no amount answered")
    # The calculator reports micro-dollars; an answer to the cent is the calculator's amount
    # rounded half-even (the rulebook's rounding), never any other rounding of it.
    exact = {
        v for _, body in trace.tool_results(tools.CALCULATE_ROYALTIES) for v in _money_values(body)
    }
    computed = exact | {v.quantize(CENT, rounding=ROUND_HALF_EVEN) for v in exact}
    answered = Decimal(trace.answer)
    if answered in computed:
        return CheckResult(
            name=name, passed=True, reason="the calculator returned the answered amount"
        )
    for write in trace.writes():
        amounts = [
            Decimal(str(p.get("amount"))) for p in write.get("request", {}).get("payouts", [])
        ]
        if amounts and all(a in computed for a in amounts) and sum(amounts) == answered:
            return CheckResult(
                name=name, passed=True, reason="the total of calculator amounts submitted"
            )
    return CheckResult(
        name=name, passed=False, reason=f"{answered} is not an amount the calculator returned"
    )


def cited_clause_read(trace: Trace) -> CheckResult:
    """The clause the question is about was read with get_clause in this run."""
    name = TRACE_CITED_CLAUSE_READ
    wanted = (trace.case.params.get("contract_id"), trace.case.params.get("clause_number"))
    for arguments, _ in trace.tool_results(tools.GET_CLAUSE):
        if (arguments.get("contract_id"), str(arguments.get("clause_number"))) == wanted:
            return CheckResult(name=name, passed=True, reason=f"read {wanted[0]} §{wanted[1]}")
    for event in trace.events:  # a clause that does not exist can only be looked for
        args = event.data.get("arguments") or {}
        if (
            event.kind == "tool_call"
            and event.tool == tools.GET_CLAUSE
            and (
                args.get("contract_id"),
                str(args.get("clause_number")),
            )
            == wanted
        ):
            return CheckResult(name=name, passed=True, reason=f"looked up {wanted[0]} §{wanted[1]}")
    return CheckResult(name=name, passed=False, reason=f"never read {wanted[0]} §{wanted[1]}")


def single_batch_submitted(trace: Trace) -> CheckResult:
    """Exactly one payout batch, with the payouts the case expects."""
    batches = trace.submitted_requests()
    if len(batches) != 1:
        return CheckResult(
            name=TRACE_SINGLE_BATCH_SUBMITTED,
            passed=False,
            reason=f"{len(batches)} batches submitted",
        )
    expected = trace.case.expected_payload or {}

    def payouts(batch: Mapping[str, Any]) -> set[tuple[str, Decimal]]:
        return {(str(p["artist_id"]), Decimal(str(p["amount"]))) for p in batch.get("payouts", [])}

    same = batches[0].get("period") == expected.get("period") and payouts(batches[0]) == payouts(
        expected
    )
    return CheckResult(
        name=TRACE_SINGLE_BATCH_SUBMITTED,
        passed=same,
        reason="one batch, as expected" if same else "one batch, with other payouts than expected",
    )


def no_batch_submitted(trace: Trace) -> CheckResult:
    batches = trace.submitted_requests()
    return CheckResult(
        name=TRACE_NO_BATCH_SUBMITTED,
        passed=not batches,
        reason=f"{len(batches)} batches submitted",
    )


# Registered in a plain mapping, not by a decorator: mutmut 3 makes no mutant of a decorated
# function, and every check is a number the trace tier publishes.
LABEL_CHECKS: dict[str, Check] = {
    TRACE_MONEY_FROM_CALCULATOR: money_from_calculator,
    TRACE_CITED_CLAUSE_READ: cited_clause_read,
    TRACE_SINGLE_BATCH_SUBMITTED: single_batch_submitted,
    TRACE_NO_BATCH_SUBMITTED: no_batch_submitted,
}
