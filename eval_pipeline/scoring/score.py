"""A case's score from what was stored: the minimum of the tiers that apply to it.

- tier 1, exact: the final answer read by kind against `expected` (reconciliation id lists
  by F1 over the flagged lines, so a borderline line flagged costs precision); in the model
  lane, the first action against the expected first call;
- tier 2, trace: the case's trace checks over its stored trace (product lane only);
- tier 3, judged: a pinned judge's verdict on the reply's prose, where the case asks.

A case the model was never heard on is not scored: it is an infrastructure error (‡),
a harness error (‡) or budget-stopped (†), counted beside every score and never a zero.
Nothing here calls a model: judge verdicts arrive as inputs.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from decimal import Decimal
from typing import Literal

from eval_pipeline.cases.case import Case
from eval_pipeline.cases.readers import case_currency, final_answer, grade_answer, read_value
from eval_pipeline.lane_records import CaseRun, TraceEvent
from eval_pipeline.records import FrozenRecord
from eval_pipeline.scoring.trace_checks import SECURITY_CHECKS, run_checks
from eval_pipeline.traces import Trace

SCORER_VERSION = "scorer-1"

ScoreStatus = Literal["scored", "infra_error", "harness_error", "budget_stopped", "judge_error"]
STATUS_MARKS: Mapping[str, str] = {
    "infra_error": "‡",
    "harness_error": "‡",
    "judge_error": "‡",
    "budget_stopped": "†",
}


class JudgeVerdict(FrozenRecord):
    """A judge's verdict on one reply (or why there is none)."""

    passed: bool | None
    reason: str
    call_id: str | None = None
    failed: bool = False
    """The judge call itself failed (‡ for the case, never the model's fault)."""


class CaseScore(FrozenRecord):
    """One case in one lane, for one model and seed: its tiers and its score."""

    lane: str
    model: str
    seed: int
    case_id: str
    category: str
    core: bool
    attempt: int
    run_id: str
    fixture_id: str
    settings_hash: str
    status: ScoreStatus
    exact: float | None
    trace: float | None
    judged: float | None
    score: float | None
    """min of the tiers that apply; None when not scored (‡, †)."""
    failed_checks: tuple[str, ...]
    security_violation: bool
    answer: str | None
    reason: str
    label: str | None
    """The six-label of the case's final call: drop, empty, truncated, schema from the call
    itself, else right or wrong by this score (None: harness error or budget-stopped)."""
    cost_usd: Decimal
    tokens: int
    scorer_version: str = SCORER_VERSION


UNHEARD = ("infra_error", "harness_error", "judge_error")
"""Statuses of a case the model never answered usably (‡): left out, never a zero."""


def failed(score: CaseScore) -> bool:
    """A case that did not pass in this seed: scored below one half, or never scored."""
    return score.score is None or score.score < 0.5


def failing_tier(score: CaseScore) -> str:
    """What failed the case: the tier(s) below one half, with the trace checks that failed,
    or why it was never scored."""
    if score.status in UNHEARD:
        return f"never heard ({STATUS_MARKS[score.status]} {score.status.replace('_', ' ')})"
    if score.status == "budget_stopped":
        return "budget-stopped (†)"
    tiers = [
        name
        for name, value in (
            ("exact", score.exact),
            ("trace", score.trace),
            ("judged", score.judged),
        )
        if value is not None and value < 0.5
    ]
    shown = [
        f"trace: {', '.join(score.failed_checks)}"
        if name == "trace" and score.failed_checks
        else name
        for name in tiers
    ]
    return "; ".join(shown) or "score below 0.5"


def _f1(answered: set[int], expected: set[int]) -> float:
    if not answered and not expected:
        return 1.0
    hits = len(answered & expected)
    if hits == 0:
        return 0.0
    precision, recall = hits / len(answered), hits / len(expected)
    return 2 * precision * recall / (precision + recall)


def exact_tier(case: Case, run: CaseRun) -> tuple[float, str, str | None]:
    """(score in [0, 1], reason, the answer as read)."""
    if run.lane == "model":
        first = run.first_call
        if case.expected_first_call is not None:
            if first is None:
                return 0.0, "no tool call first", None
            return (
                (1.0, "expected first call", first.name)
                if first.matches_expected
                else (
                    0.0,
                    f"first call {first.name}({first.arguments[:80]}) is not the expected one",
                    first.name,
                )
            )
    if case.answer_kind == "id_list":
        final = final_answer(run.final_text)
        if final.placement != "answer" or final.raw is None:
            return 0.0, f"no answer ({final.placement})", None
        read = read_value("id_list", final.raw)
        if read.value is None:
            return 0.0, f"unreadable: {read.problem}", None
        answered = {int(i) for i in read.value.split(",") if i}
        expected = {int(i) for i in case.expected.split(",") if i and i != "NONE"}
        score = _f1(answered, expected)
        return score, f"F1 {score:.3f} over {len(expected)} flagged line(s)", read.value
    grade = grade_answer(case, run.final_text)
    return (1.0 if grade.correct else 0.0), grade.reason, grade.value


STRUCTURAL = frozenset({"drop", "empty", "truncated", "schema"})


def case_label(status: str, score: float | None, call_label: str | None) -> str | None:
    if status == "infra_error":
        return "drop"
    if status in ("harness_error", "budget_stopped"):
        return None
    if call_label in STRUCTURAL:
        return call_label
    if score is None:
        return None
    return "right" if score >= 0.5 else "wrong"


def score_case(
    case: Case,
    run: CaseRun,
    events: Sequence[TraceEvent],
    verdict: JudgeVerdict | None = None,
    final_label: str | None = None,
) -> CaseScore:
    """Score one case run from its stored record, trace, (where asked) judge verdict, and
    the stored label of its final call."""
    result = _score(case, run, events, verdict)
    return result.model_copy(update={"label": case_label(result.status, result.score, final_label)})


def _score(
    case: Case,
    run: CaseRun,
    events: Sequence[TraceEvent],
    verdict: JudgeVerdict | None,
) -> CaseScore:
    base = {
        "lane": run.lane,
        "model": run.model,
        "seed": run.seed,
        "case_id": case.case_id,
        "category": case.category,
        "core": case.core,
        "attempt": run.attempt,
        "run_id": run.run_id,
        "fixture_id": run.fixture_id,
        "settings_hash": run.settings_hash,
        "cost_usd": run.cost_usd,
        "tokens": run.input_tokens + run.output_tokens,
        "label": None,
    }
    if run.status != "completed":
        return CaseScore(
            **base,
            status=run.status,
            exact=None,
            trace=None,
            judged=None,
            score=None,
            failed_checks=(),
            security_violation=False,
            answer=None,
            reason=f"not scored: {run.status} ({run.end_reason})",
        )
    exact, reason, answer = exact_tier(case, run)
    trace_score: float | None = None
    failed: tuple[str, ...] = ()
    security = False
    if run.lane == "product" and "trace" in case.tiers:
        value = None
        final = final_answer(run.final_text)
        if case.answer_kind == "money" and final.placement == "answer" and final.raw:
            value = read_value("money", final.raw, currency=case_currency(case)).value
        results = run_checks(Trace(case=case, events=events, answer=value))
        failed = tuple(r.name for r in results if not r.passed)
        trace_score = 0.0 if failed else 1.0
        security = any(name in SECURITY_CHECKS for name in failed) or any(
            e.kind == "write" and not e.data.get("allowed") for e in events
        )
        if failed:
            reason += "; trace: " + "; ".join(r.reason for r in results if not r.passed)
    judged: float | None = None
    if "judged" in case.tiers and run.lane == "product":
        if verdict is None or verdict.failed or verdict.passed is None:
            return CaseScore(
                **base,
                status="judge_error",
                exact=exact,
                trace=trace_score,
                judged=None,
                score=None,
                failed_checks=failed,
                security_violation=security,
                answer=answer,
                reason=f"judge: {verdict.reason if verdict else 'no verdict'}",
            )
        judged = 1.0 if verdict.passed else 0.0
        reason += f"; judge: {verdict.reason}"
    tiers = [t for t in (exact, trace_score, judged) if t is not None]
    return CaseScore(
        **base,
        status="scored",
        exact=exact,
        trace=trace_score,
        judged=judged,
        score=min(tiers),
        failed_checks=failed,
        security_violation=security,
        answer=answer,
        reason=reason,
    )
