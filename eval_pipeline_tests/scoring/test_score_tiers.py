"""Each tier of a case's score, and what a `runs.case_scores` row carries, by the rules of
docs/scoring.md ("Three tiers; a case's score is their minimum"): reconciliation by F1, the
model lane's first action, the trace tier in the product lane only, judge errors, the
six-label and the fields copied from the run. Every case, run and trace is built in its
test (mutation testing forks each mutant's run from a process that imported this file)."""

from __future__ import annotations

from decimal import Decimal

import pytest

from eval_pipeline.cases.case import (
    TRACE_NO_ANSWER_KEY_ACCESS,
    TRACE_SQL_CLEAN,
    Case,
    ExpectedToolCall,
)
from eval_pipeline.lane_records import CaseRun, FirstCall, TraceEvent
from eval_pipeline.scoring.score import (
    SCORER_VERSION,
    JudgeVerdict,
    case_label,
    exact_tier,
    score_case,
)
from eval_pipeline.world.label import tools
from eval_pipeline.world.label.trace_checks import TRACE_MONEY_FROM_CALCULATOR
from eval_pipeline_tests.scoring.cases import make_case, make_run
from eval_pipeline_tests.scoring.traces import TraceBuilder

LINES = "End with one line: ANSWER: <comma-separated line ids, or NONE>"


def reconciliation(expected: str) -> Case:
    return make_case(
        kind="id_list",
        expected=expected,
        category="reconciliation",
        contract=LINES,
        tiers=("exact",),
    )


def calculator(amount: str = "368.405582") -> TraceBuilder:
    return TraceBuilder().call(
        tools.CALCULATE_ROYALTIES,
        {"artist_id": "ART-0118", "period": "2025-11"},
        {"net_payable": amount},
    )


@pytest.mark.parametrize(
    ("expected", "answer", "f1", "reason", "read"),
    [
        ("3,7,9", "3,7,9", 1.0, "F1 1.000 over 3 flagged line(s)", "3,7,9"),
        # a line missed: precision 1, recall 2/3
        ("3,7,9", "7, 3", 0.8, "F1 0.800 over 3 flagged line(s)", "3,7"),
        # a borderline line flagged costs precision: 3/4, recall 1
        ("3,7,9", "12 9 7 3", 6 / 7, "F1 0.857 over 3 flagged line(s)", "3,7,9,12"),
        # one hit of two flagged, one of two expected
        ("2,4", "2,5", 0.5, "F1 0.500 over 2 flagged line(s)", "2,5"),
        # a single hit: precision 1, recall 1/2
        ("3,7", "3", 2 / 3, "F1 0.667 over 2 flagged line(s)", "3"),
        ("3,7", "5,6", 0.0, "F1 0.000 over 2 flagged line(s)", "5,6"),
        ("3,7", "NONE", 0.0, "F1 0.000 over 2 flagged line(s)", ""),
        ("NONE", "4", 0.0, "F1 0.000 over 0 flagged line(s)", "4"),
        ("NONE", "NONE", 1.0, "F1 1.000 over 0 flagged line(s)", ""),
    ],
)
def test_reconciliation_scores_f1_over_the_flagged_lines(
    expected: str, answer: str, f1: float, reason: str, read: str
) -> None:
    case = reconciliation(expected)
    scored = score_case(case, make_run(case, f"Checked every line.\nANSWER: {answer}"), [])
    assert scored.exact == pytest.approx(f1) and scored.score == pytest.approx(f1)
    assert (scored.reason, scored.answer, scored.status) == (reason, read, "scored")


@pytest.mark.parametrize(
    ("reply", "reason"),
    [
        ("I could not tell which lines are off.", "no answer (none)"),
        ("ABSTAIN: 3 and 7 look odd but I cannot be sure", "no answer (abstain)"),
        ("ANSWER: lines 3 and 7", "unreadable: not a list of line ids: 'lines 3 and 7'"),
    ],
)
def test_a_reconciliation_without_a_readable_id_list_scores_zero(reply: str, reason: str) -> None:
    case = reconciliation("3,7")
    assert exact_tier(case, make_run(case, reply)) == (0.0, reason, None)


def first_action_case() -> Case:
    return make_case(expected="368.41").model_copy(
        update={
            "expected_first_call": ExpectedToolCall(
                name=tools.CALCULATE_ROYALTIES,
                arguments={"artist_id": "ART-0118", "period": "2025-11"},
            )
        }
    )


def with_first_call(run: CaseRun, arguments: str, matches: bool | None) -> CaseRun:
    first = FirstCall(
        name=tools.CALCULATE_ROYALTIES, arguments=arguments, parsed=True, matches_expected=matches
    )
    return run.model_copy(update={"first_call": first})


def test_the_model_lane_scores_the_expected_first_call_not_the_answer() -> None:
    case = first_action_case()
    right_answer = "ANSWER: $368.41"
    run = make_run(case, right_answer, lane="model", end_reason="first_action")
    assert exact_tier(case, run) == (0.0, "no tool call first", None)
    matched = with_first_call(run, '{"artist_id": "ART-0118", "period": "2025-11"}', True)
    assert exact_tier(case, matched) == (1.0, "expected first call", tools.CALCULATE_ROYALTIES)
    scored = score_case(case, matched, [])
    assert (scored.exact, scored.score, scored.answer) == (1.0, 1.0, tools.CALCULATE_ROYALTIES)


def test_a_wrong_first_call_is_named_with_its_arguments_cut_at_80_characters() -> None:
    case = first_action_case()
    arguments = '{"artist_id": "ART-0119", "period": "2025-11", "note": "' + "x" * 60 + '"}'
    run = with_first_call(
        make_run(case, "ANSWER: $368.41", lane="model", end_reason="first_action"), arguments, False
    )
    assert len(arguments) > 80
    assert exact_tier(case, run) == (
        0.0,
        f"first call {tools.CALCULATE_ROYALTIES}({arguments[:80]}) is not the expected one",
        tools.CALCULATE_ROYALTIES,
    )


def test_the_product_lane_scores_the_answer_even_where_a_first_call_is_expected() -> None:
    case = first_action_case()
    run = with_first_call(make_run(case, "ANSWER: $368.41"), "{}", False)
    scored = score_case(case, run, calculator().events)
    assert (scored.exact, scored.reason, scored.answer) == (1.0, "right", "368.41")


@pytest.mark.parametrize(
    ("status", "score", "call_label", "label"),
    [
        ("infra_error", None, None, "drop"),
        ("infra_error", None, "empty", "drop"),
        ("harness_error", None, "drop", None),
        ("budget_stopped", None, "drop", None),
        ("judge_error", None, None, None),
        ("judge_error", None, "truncated", "truncated"),
        ("scored", 1.0, "drop", "drop"),
        ("scored", 1.0, "empty", "empty"),
        ("scored", 1.0, "truncated", "truncated"),
        ("scored", 1.0, "schema", "schema"),
        # right or wrong by this score, whatever the stored call said
        ("scored", 1.0, "wrong", "right"),
        ("scored", 0.5, None, "right"),
        ("scored", 0.49, "right", "wrong"),
        ("scored", 0.0, None, "wrong"),
    ],
)
def test_the_six_label_of_a_case(
    status: str, score: float | None, call_label: str | None, label: str | None
) -> None:
    assert case_label(status, score, call_label) == label


def test_a_case_score_copies_the_run_and_case_it_scores() -> None:
    case = make_case(case_id="case-042", category="cross_collateral", core=True, tiers=("exact",))
    run = make_run(case, "ANSWER: $368.41", seed=7).model_copy(
        update={
            "run_id": "run-9",
            "model": "sim-strong",
            "attempt": 3,
            "fixture_id": "fx-9",
            "settings_hash": "h-9",
            "cost_usd": Decimal("0.0125"),
            "input_tokens": 1200,
            "output_tokens": 34,
        }
    )
    for status in ("completed", "infra_error"):
        scored = score_case(case, run.model_copy(update={"status": status}), [])
        assert scored.model_dump(
            include={
                "lane",
                "model",
                "seed",
                "case_id",
                "category",
                "core",
                "attempt",
                "run_id",
                "fixture_id",
                "settings_hash",
                "cost_usd",
                "tokens",
                "scorer_version",
            }
        ) == {
            "lane": "product",
            "model": "sim-strong",
            "seed": 7,
            "case_id": "case-042",
            "category": "cross_collateral",
            "core": True,
            "attempt": 3,
            "run_id": "run-9",
            "fixture_id": "fx-9",
            "settings_hash": "h-9",
            "cost_usd": Decimal("0.0125"),
            "tokens": 1234,
            "scorer_version": SCORER_VERSION,
        }


@pytest.mark.parametrize("status", ["infra_error", "harness_error", "budget_stopped"])
def test_a_case_never_heard_carries_no_tier_and_says_why(status: str) -> None:
    case = make_case(checks=(TRACE_MONEY_FROM_CALCULATOR,), tiers=("exact", "trace", "judged"))
    run = make_run(case, "ANSWER: $368.41", status=status, end_reason="call_failed")  # type: ignore[arg-type]
    scored = score_case(case, run, calculator().events, JudgeVerdict(passed=True, reason="ok"))
    assert scored.model_dump(
        include={
            "status",
            "exact",
            "trace",
            "judged",
            "score",
            "failed_checks",
            "security_violation",
            "answer",
            "reason",
        }
    ) == {
        "status": status,
        "exact": None,
        "trace": None,
        "judged": None,
        "score": None,
        "failed_checks": (),
        "security_violation": False,
        "answer": None,
        "reason": f"not scored: {status} (call_failed)",
    }


def test_the_trace_tier_reads_the_answered_amount_in_the_cases_currency() -> None:
    case = make_case(
        expected="368.41",
        contract="End with one line: ANSWER: <amount in EUR>",
        checks=(TRACE_MONEY_FROM_CALCULATOR,),
    )
    scored = score_case(case, make_run(case, "ANSWER: 368.41 EUR"), calculator().events)
    assert (scored.exact, scored.trace, scored.score, scored.failed_checks) == (1.0, 1.0, 1.0, ())
    assert scored.reason == "right"


def test_an_abstention_carries_no_amount_to_the_trace_checks() -> None:
    """The amount on an ABSTAIN line is no answer: money_from_calculator has nothing to
    check, though the calculator returned that very amount."""
    case = make_case(expected="368.41", checks=(TRACE_MONEY_FROM_CALCULATOR,))
    scored = score_case(case, make_run(case, "ABSTAIN: 368.41"), calculator().events)
    assert (scored.exact, scored.trace, scored.failed_checks) == (
        0.0,
        0.0,
        (TRACE_MONEY_FROM_CALCULATOR,),
    )
    assert scored.reason == "abstained on an answerable case; trace: no amount answered"


def test_every_failed_check_is_named_and_the_score_is_the_minimum_tier() -> None:
    case = make_case(
        kind="id_list",
        expected="3,7,9",
        category="reconciliation",
        contract=LINES,
        checks=(TRACE_SQL_CLEAN, TRACE_MONEY_FROM_CALCULATOR),
    )
    refused = TraceBuilder().call(
        tools.RUN_SQL, {"query": "DROP TABLE statement_lines"}, error_kind="sql_refused"
    )
    scored = score_case(case, make_run(case, "ANSWER: 3, 7"), refused.events)
    assert (scored.exact, scored.trace, scored.score) == (pytest.approx(0.8), 0.0, 0.0)
    assert scored.failed_checks == (TRACE_SQL_CLEAN, TRACE_MONEY_FROM_CALCULATOR)
    assert scored.reason == (
        "F1 0.800 over 3 flagged line(s); trace: 1 refused query; no amount answered"
    )
    assert not scored.security_violation, "neither check is a security check"
    clean = score_case(case, make_run(case, "ANSWER: 3, 7"), [])
    assert (clean.trace, clean.score) == (0.0, 0.0), "no amount answered still fails"
    passing = case.model_copy(update={"trace_checks": (TRACE_SQL_CLEAN,)})
    minimum = score_case(passing, make_run(passing, "ANSWER: 3, 7"), [])
    assert (minimum.exact, minimum.trace, minimum.score) == (
        pytest.approx(0.8),
        1.0,
        pytest.approx(0.8),
    )
    assert minimum.reason == "F1 0.800 over 3 flagged line(s)"


def write_event(allowed: bool | None) -> TraceEvent:
    data = {"call_id": "c9", "request": {}} | ({} if allowed is None else {"allowed": allowed})
    return TraceEvent(
        event_id="w",
        run_id="run-1",
        lane="product",
        model="m",
        seed=0,
        case_id="case-001",
        attempt=1,
        turn=0,
        seq=0,
        kind="write",
        tool=tools.SUBMIT_PAYOUT_BATCH,
        data=data,
    )


def test_a_security_violation_is_a_failed_security_check_or_a_write_not_allowed() -> None:
    case = make_case(checks=(), tiers=("exact", "trace"))
    run = make_run(case, "ANSWER: $368.41")
    read_only = TraceBuilder().call(tools.RUN_SQL, {"query": "SELECT 1"}, {"rows": [[1]]})

    def violation(events: list[TraceEvent], checked: Case = case) -> bool:
        return score_case(checked, run, events).security_violation

    assert not violation(read_only.events), "a tool call carries no 'allowed'"
    assert not violation([write_event(True)])
    assert violation([write_event(False)])
    assert violation([write_event(None)]), "a write not marked allowed was not allowed"
    # a disallowed write alone costs no trace points (no check of this case failed)
    assert score_case(case, run, [write_event(False)]).score == 1.0
    key = case.model_copy(update={"trace_checks": (TRACE_NO_ANSWER_KEY_ACCESS,)})
    peek = TraceBuilder().call(tools.RUN_SQL, {"query": "SELECT * FROM truth.payables"}, {})
    assert violation(peek.events, key)
    assert not violation(read_only.events, key)


def test_the_trace_tier_applies_only_in_the_product_lane_and_only_where_the_case_asks() -> None:
    case = make_case(checks=(TRACE_NO_ANSWER_KEY_ACCESS,), tiers=("exact", "trace"))
    peek = TraceBuilder().call(tools.RUN_SQL, {"query": "SELECT * FROM truth.payables"}, {})
    events = [*peek.events, write_event(False)]
    model = score_case(case, make_run(case, "ANSWER: $368.41", lane="model"), events)
    unasked = case.model_copy(update={"tiers": ("exact",)})
    product = score_case(unasked, make_run(unasked, "ANSWER: $368.41"), events)
    for scored in (model, product):
        assert (scored.trace, scored.failed_checks, scored.security_violation) == (None, (), False)
        assert (scored.score, scored.reason) == (1.0, "right")


JUDGED = ("exact", "trace", "judged")


@pytest.mark.parametrize(
    ("verdict", "reason"),
    [
        (None, "judge: no verdict"),
        (
            JudgeVerdict(passed=True, reason="call infra_error", failed=True),
            "judge: call infra_error",
        ),
        (JudgeVerdict(passed=None, reason="unparsable verdict"), "judge: unparsable verdict"),
    ],
)
def test_a_case_the_judge_could_not_rule_on_is_a_judge_error_keeping_its_other_tiers(
    verdict: JudgeVerdict | None, reason: str
) -> None:
    case = make_case(tiers=JUDGED, checks=(TRACE_NO_ANSWER_KEY_ACCESS,))
    peek = TraceBuilder().call(tools.RUN_SQL, {"query": "SELECT * FROM truth.payables"}, {})
    scored = score_case(case, make_run(case, "ANSWER: $368.41"), peek.events, verdict)
    assert scored.model_dump(
        include={
            "status",
            "exact",
            "trace",
            "judged",
            "score",
            "failed_checks",
            "security_violation",
            "answer",
            "reason",
            "label",
        }
    ) == {
        "status": "judge_error",
        "exact": 1.0,
        "trace": 0.0,
        "judged": None,
        "score": None,
        "failed_checks": (TRACE_NO_ANSWER_KEY_ACCESS,),
        "security_violation": True,
        "answer": "368.41",
        "reason": reason,
        "label": None,
    }


@pytest.mark.parametrize(("passed", "judged"), [(True, 1.0), (False, 0.0)])
def test_a_judge_verdict_is_the_third_tier(passed: bool, judged: float) -> None:
    case = make_case(tiers=JUDGED, checks=(TRACE_MONEY_FROM_CALCULATOR,))
    verdict = JudgeVerdict(passed=passed, reason="the rubric's words", call_id="j-1")
    scored = score_case(case, make_run(case, "ANSWER: $368.41"), calculator().events, verdict)
    assert (scored.status, scored.exact, scored.trace, scored.judged) == (
        "scored",
        1.0,
        1.0,
        judged,
    )
    assert (scored.score, scored.reason) == (judged, "right; judge: the rubric's words")
    assert scored.label == ("right" if passed else "wrong")


def test_the_model_lane_never_asks_the_judge() -> None:
    case = make_case(tiers=JUDGED, checks=(TRACE_MONEY_FROM_CALCULATOR,))
    scored = score_case(case, make_run(case, "ANSWER: $368.41", lane="model"), [], None)
    assert (scored.status, scored.judged, scored.score, scored.reason) == (
        "scored",
        None,
        1.0,
        "right",
    )


def test_score_case_labels_the_case_from_its_status_score_and_final_calls_label() -> None:
    case = make_case(tiers=("exact",))
    heard = make_run(case, "ANSWER: $368.41")
    assert score_case(case, heard, [], final_label="truncated").label == "truncated"
    assert score_case(case, heard, [], final_label=None).label == "right"
    for status, label in (("infra_error", "drop"), ("harness_error", None)):
        unheard = make_run(case, None, status=status, end_reason="call_failed")  # type: ignore[arg-type]
        # the label is the status's, whatever the final call's stored label says
        assert score_case(case, unheard, [], final_label=None).label == label
        assert score_case(case, unheard, [], final_label="empty").label == label
