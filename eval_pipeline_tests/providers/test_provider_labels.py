"""The call labels and their summary, branch by branch (no sim).

Closes the gaps mutation testing found (issue 13): a retried attempt keeps its ``drop``
label and cause, a call with no response is ``empty``, graded calls keep the answer they
were graded on, a tool-call grader is wrong for a reply without a tool call, and every
count of the summary (retry causes, ungraded calls, harness errors) is what was fed in.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from eval_pipeline.cases.readers import grade_answer, reader_for
from eval_pipeline.providers.labels import (
    DROP_CAUSES,
    LABELS,
    CallStatus,
    FailureCause,
    GradeInput,
    Label,
    LabelResult,
    call_problem,
    classify,
    expect_answer,
    expect_tool_call,
    naive_pass,
    summarize,
    top_failures,
)
from eval_pipeline.providers.redact import Redactor
from eval_pipeline.providers.transport import SERVER_MESSAGE_CHARS, server_message
from eval_pipeline.providers.types import ModelResponse, ToolCall
from eval_pipeline_tests.cases.test_readers import CORRECTED_REPLIES, make_case
from eval_pipeline_tests.providers.conftest import LOOKUP

ANSWERED = ModelResponse(text="Checked the ledger.\nANSWER: 42", stop_kind="end")


def tool_reply(name: str = "lookup", arguments: str = '{"query": "ART-0001"}') -> ModelResponse:
    return ModelResponse(
        tool_calls=(ToolCall(id="c1", name=name, arguments=arguments),), stop_kind="tool_use"
    )


@pytest.mark.parametrize("status", ["retried", "infra_error"])
@pytest.mark.parametrize("cause", DROP_CAUSES)
def test_a_failed_attempt_is_a_drop_with_its_cause_whether_retried_or_final(
    status: CallStatus, cause: FailureCause
) -> None:
    assert classify(status, None, failure_cause=cause) == LabelResult(
        label="drop", reason=f"drop: {cause}", drop_cause=cause
    )


@pytest.mark.parametrize("cause", ["harness_4xx", "budget", None])
def test_a_drop_whose_cause_is_not_a_path_failure_has_no_drop_cause(
    cause: FailureCause | None,
) -> None:
    assert classify("retried", ANSWERED, failure_cause=cause) == LabelResult(
        label="drop", reason="drop: None", drop_cause=None
    )


@pytest.mark.parametrize("status", ["harness_error", "budget_stopped"])
def test_harness_errors_and_budget_stops_are_unlabelled_and_say_which(status: CallStatus) -> None:
    assert classify(status, ANSWERED, failure_cause="5xx", grader=expect_answer("42")) == (
        LabelResult(label=None, reason=status)
    )


def test_a_call_with_no_response_is_empty() -> None:
    assert classify("ok", None, grader=expect_answer("42")) == LabelResult(
        label="empty", reason="empty: no response"
    )
    unparsable = ModelResponse(body_problem="malformed_json", stop_kind="end")
    assert classify("ok", unparsable) == LabelResult(label="empty", reason="empty: malformed_json")


def test_the_truncated_reason_names_the_stop_reason() -> None:
    cut = ANSWERED.model_copy(update={"stop_kind": "max_tokens", "finish_reason": "length"})
    assert classify("ok", cut) == LabelResult(
        label="truncated", reason="truncated: stop reason 'length'"
    )


@pytest.mark.parametrize(
    ("reply", "reason"),
    [
        (tool_reply(name="delete_all"), "schema: tool 'delete_all' was not offered"),
        (tool_reply(arguments='{"query": '), "schema: arguments of 'lookup' are not valid JSON"),
        (
            tool_reply(arguments='["ART-0001"]'),
            "schema: arguments of 'lookup' are not a JSON object",
        ),
        (ModelResponse(text="It is 42.", stop_kind="end"), "schema: no answer line in the text"),
    ],
)
def test_schema_failures_say_what_is_wrong(reply: ModelResponse, reason: str) -> None:
    assert classify("ok", reply, (LOOKUP,), grader=expect_answer("42")) == LabelResult(
        label="schema", reason=reason
    )


def test_a_tool_call_breaking_the_schema_names_the_tool_and_the_problem() -> None:
    problem = call_problem("lookup", '{"query": 7}', (LOOKUP,))
    assert problem is not None and problem.startswith("arguments of 'lookup': ")
    assert call_problem("lookup", '{"query": "ART-0001"}', (LOOKUP,)) is None


def test_a_well_formed_reply_with_a_tool_call_and_no_answer_line_is_not_a_schema_failure() -> None:
    assert classify("ok", tool_reply(), (LOOKUP,)) == LabelResult(
        label=None, reason="well-formed, not graded", answer=None
    )


def test_graded_calls_keep_the_answer_they_were_graded_on() -> None:
    assert classify("ok", ANSWERED, grader=expect_answer("42")) == LabelResult(
        label="right", reason="graded right", answer="42"
    )
    assert classify("ok", ANSWERED, grader=expect_answer("41")) == LabelResult(
        label="wrong", reason="graded wrong", answer="42"
    )
    assert classify("ok", ANSWERED) == LabelResult(
        label=None, reason="well-formed, not graded", answer="42"
    )


@pytest.mark.parametrize(("text", "raw"), CORRECTED_REPLIES)
def test_the_stored_label_and_the_score_take_the_same_corrected_answer(text: str, raw: str) -> None:
    """Issue 25, finding 9: the label stored at call time and the score read one answer,
    the last one, wherever its tag stands (the withdrawn 1,204.18 graded neither)."""
    case = make_case("money", "1250.00")
    reply = ModelResponse(text=text, stop_kind="end")
    label = classify(
        "ok", reply, grader=expect_answer("1250.00", "money"), read_answer=reader_for(case)
    )
    assert label == LabelResult(label="right", reason="graded right", answer=raw)
    assert grade_answer(case, text).value == "1250"


def test_the_grader_sees_the_whole_reply_and_the_answer_read_from_it() -> None:
    seen: list[GradeInput] = []

    def grader(reply: GradeInput) -> bool:
        seen.append(reply)
        return True

    classify("ok", ANSWERED, grader=grader)
    assert seen == [GradeInput(response=ANSWERED, answer="42")]


def test_a_tool_call_grader_is_wrong_for_a_reply_without_a_tool_call() -> None:
    grader = expect_tool_call("lookup", {"query": "ART-0001"})
    assert classify("ok", ANSWERED, (LOOKUP,), grader=grader).label == "wrong"
    assert not grader(GradeInput(response=ANSWERED, answer="42"))
    assert grader(GradeInput(response=tool_reply(), answer=None))


@pytest.mark.parametrize(
    "reply",
    [
        tool_reply(name="search"),  # right arguments, wrong tool
        tool_reply(arguments='{"query": "ART-0002"}'),
        tool_reply(arguments='{"query": '),  # not JSON: wrong, not a crash
    ],
)
def test_a_tool_call_grader_wants_the_name_and_the_arguments(reply: ModelResponse) -> None:
    grader = expect_tool_call("lookup", {"query": "ART-0001"})
    assert not grader(GradeInput(response=reply, answer=None))


def test_an_answer_grader_is_wrong_for_no_answer_and_for_an_abstention() -> None:
    grader = expect_answer("ANSWER: 42")
    assert grader(GradeInput(response=ANSWERED, answer="42"))
    assert not grader(GradeInput(response=ANSWERED, answer=None))
    assert not grader(GradeInput(response=ANSWERED, answer="ABSTAIN: 42 is not in the ledger"))
    # an abstention is never an answer, even one that reads like the expected text
    assert not expect_answer("ABSTAIN")(GradeInput(response=ANSWERED, answer="ABSTAIN"))
    structure = expect_answer('{"b": 1, "a": [2]}', kind="json")
    assert structure(GradeInput(response=ANSWERED, answer='{"a":[2],"b":1}'))
    assert not structure(GradeInput(response=ANSWERED, answer='{"a":[2],"b":2}'))


@dataclass(frozen=True)
class Call:
    status: CallStatus
    label: Label | None = None
    failure_cause: FailureCause | None = None


def test_the_summary_counts_every_kind_of_call_apart() -> None:
    calls = [
        Call("retried", "drop", "429"),
        Call("retried", "drop", "429"),
        Call("retried", "drop", "timeout"),
        Call("infra_error", "drop", "5xx"),
        Call("harness_error", None, "harness_4xx"),
        Call("harness_error", None, "harness_4xx"),
        Call("budget_stopped", None, "budget"),
        Call("ok", None),
        Call("ok", None),
        Call("ok", None),
        Call("ok", "right"),
        Call("ok", "wrong"),
        Call("ok", "schema"),
        Call("ok", "right"),
    ]
    summary = summarize(calls)
    assert summary.labels == {
        "drop": 1,
        "empty": 0,
        "truncated": 0,
        "schema": 1,
        "wrong": 1,
        "right": 2,
    }
    assert summary.drop_causes == {"5xx": 1}
    assert summary.retries == 3
    assert summary.retry_causes == {"429": 2, "timeout": 1}
    assert (summary.ungraded, summary.harness_errors, summary.budget_stopped) == (3, 2, 1)
    assert (summary.labelled, summary.infra_errors) == (5, 1)
    assert summary.yield_rate == Fraction(3, 5)
    assert summary.accuracy_on_yield == Fraction(2, 3)
    assert summary.schema_rate == Fraction(1, 5)


def test_a_summary_of_nothing_has_no_rates() -> None:
    summary = summarize([])
    assert summary.labels == dict.fromkeys(LABELS, 0)
    assert (summary.yield_rate, summary.accuracy_on_yield, summary.schema_rate) == (None,) * 3
    only_drops = summarize([Call("infra_error", "drop", "connect")])
    assert only_drops.yield_rate == 0 and only_drops.accuracy_on_yield is None
    assert only_drops.schema_rate == 0


CALLS = st.builds(
    Call,
    status=st.sampled_from(["ok", "retried", "infra_error", "harness_error", "budget_stopped"]),
    label=st.sampled_from([None, *LABELS]),
    failure_cause=st.sampled_from([None, *DROP_CAUSES]),
)


@given(st.lists(CALLS, max_size=40))
def test_every_call_is_counted_exactly_once(calls: list[Call]) -> None:
    summary = summarize(calls)
    total = (
        summary.labelled
        + summary.ungraded
        + summary.harness_errors
        + summary.budget_stopped
        + summary.retries
    )
    assert total == len(calls)
    assert sum(summary.retry_causes.values()) == summary.retries
    assert sum(summary.drop_causes.values()) == summary.labels["drop"]


def test_the_naive_pass_is_a_200_with_the_text_anywhere_in_the_body() -> None:
    assert naive_pass(200, '{"text": "ANSWER: 42"}', "42")
    assert not naive_pass(500, '{"text": "ANSWER: 42"}', "42")
    assert not naive_pass(None, '{"text": "ANSWER: 42"}', "42")
    assert not naive_pass(200, None, "42")
    assert not naive_pass(200, '{"text": "ANSWER: 41"}', "42")


def test_a_money_grader_reads_both_sides_in_the_case_currency() -> None:
    euros = expect_answer("12.34", kind="money", currency="EUR")
    assert euros(GradeInput(response=ANSWERED, answer="EUR 12.34"))
    assert euros(GradeInput(response=ANSWERED, answer="€12.340"))
    assert not euros(GradeInput(response=ANSWERED, answer="$12.34"))
    assert expect_answer("EUR 12.34", kind="money", currency="EUR")(
        GradeInput(response=ANSWERED, answer="12.34")
    )
    assert not expect_answer("EUR 12.34", kind="money")(
        GradeInput(response=ANSWERED, answer="12.34")
    )


@pytest.mark.parametrize(
    ("body", "said"),
    [
        ('{"error":{"message":"No connected db."}}', "No connected db."),
        ('{"type":"error","error":{"type":"x","message":"bad key"}}', "bad key"),
        ('{"error": "slow down"}', "slow down"),
        ('{"detail": "Not Found"}', "Not Found"),
        ('{"message": "nope\\n  twice"}', "nope twice"),
        ("<html>\n<b>Bad Gateway</b></html>", "<html> <b>Bad Gateway</b></html>"),
        ("", None),
        ("  \n", None),
    ],
)
def test_the_servers_message_is_read_from_its_error_body(body: str, said: str | None) -> None:
    assert server_message(body) == said


def test_a_long_server_message_is_cut_to_its_bound() -> None:
    said = server_message("x" * 5000)
    assert said is not None and len(said) == SERVER_MESSAGE_CHARS and said.endswith("…")


@dataclass(frozen=True)
class Failed:
    status: CallStatus
    http_status: int | None
    failure_detail: str | None


def test_top_failures_groups_final_failures_most_common_first_redacted() -> None:
    refused = Failed("harness_error", 400, "HTTP 400: No connected db. key sk-secret-123")
    calls = [
        refused,
        refused,
        Failed("infra_error", None, "connect: refused"),
        Failed("retried", 503, "HTTP 503"),
        Failed("ok", 200, None),
        Failed("budget_stopped", None, "over budget"),
    ]
    groups = top_failures(calls, Redactor(["sk-secret-123"]))
    assert [(g.status, g.http_status, g.detail, g.calls) for g in groups] == [
        ("harness_error", 400, "HTTP 400: No connected db. key [REDACTED]", 2),
        ("infra_error", None, "connect: refused", 1),
    ]
    assert top_failures(calls, Redactor(), limit=1)[0].calls == 2


def test_a_lanes_labels_are_split_into_final_answers_and_calls_inside_the_loop() -> None:
    """Issue 28: a lane scoring 94.7 showed `call_labels` "right: 0, schema: 113": the calls
    inside the loop (never graded) were counted with the final answers."""
    from eval_pipeline.providers.envelope import split_labels
    from eval_pipeline_tests.scoring.cases import make_case
    from eval_pipeline_tests.scoring.test_relabel import envelope

    case = make_case()
    calls = [
        envelope(lane="product", case=case, response=None, label="schema", call_id="tool-1"),
        envelope(lane="product", case=case, response=None, label="drop", call_id="final-1"),
        # the retry of the final call is what counts for it
        envelope(
            lane="product", case=case, response=None, label="right", call_id="final-1", attempt=2
        ),
        envelope(lane="product", case=case, response=None, label="wrong", call_id="final-2"),
        envelope(lane="product", case=case, response=None, label=None, call_id="final-3"),
        envelope(lane="product", case=case, response=None, label=None, call_id="tool-2"),
    ]
    assert split_labels(calls, {"final-1", "final-2", "final-3"}) == {
        "final_answer": {"right": 1, "wrong": 1, "graded by the scores": 1},
        "inside_the_loop": {"schema": 1},
    }
