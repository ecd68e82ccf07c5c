"""Bulk re-labelling, one rule at a time, on warehouses built inside each test: each label,
reason, answer and drop cause the bulk path writes, which envelopes it reads, the report's
transitions, examples, grades and lines, and the errors that name a row
(docs/scoring.md, "Commands")."""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path

import duckdb
import pytest

from eval_pipeline.providers.envelope import CallEnvelope
from eval_pipeline.providers.types import ModelResponse, ToolCall
from eval_pipeline.scoring.relabel import (
    STATUSES,
    GradeCount,
    LabelChange,
    RelabelError,
    RelabelReport,
    Transition,
    relabel_envelopes,
)
from eval_pipeline.warehouse import has_table
from eval_pipeline.warehouse.envelopes import TABLE, insert_envelopes
from eval_pipeline_tests.scoring.test_relabel import (
    ABSTAIN,
    FIXTURES,
    JSON_CASE,
    JSON_EXPECTED,
    MONEY,
    NOT_GRADED,
    RUN_SQL,
    calls,
    cases_for,
    envelope,
    one_by_one,
    store,
    stored,
    table,
    text,
)

RIGHT = f"ANSWER: ${MONEY.expected}"
READ = f"${MONEY.expected}"
"""What the reader reads from RIGHT (the line as written)."""


def warehouse(tmp_path: Path) -> duckdb.DuckDBPyConnection:
    return duckdb.connect(str(tmp_path / "warehouse.duckdb"))


def relabelled(
    tmp_path: Path, envelopes: list[CallEnvelope], **options: int
) -> tuple[duckdb.DuckDBPyConnection, RelabelReport]:
    con = warehouse(tmp_path)
    store(tmp_path, con, envelopes)
    return con, relabel_envelopes(con, cases_for, **options)


# -- what each envelope gets ----------------------------------------------------------------


def test_every_kind_of_envelope_gets_the_label_reason_answer_and_drop_cause_classify_gives(
    tmp_path: Path,
) -> None:
    tool_step = calls("calculate_royalties", '{"artist_id": "ART-0001", "period": "2025-01"}')
    two_calls = ModelResponse(
        tool_calls=(
            ToolCall(id="c1", name="run_sql", arguments='{"query": "SELECT 1"}'),
            ToolCall(id="c2", name="run_sql", arguments="[1]"),
            ToolCall(id="c3", name="no_such_tool", arguments="{}"),
        ),
        stop_kind="tool_use",
        finish_reason="tool_calls",
    )
    items = {
        "right": envelope(lane="product", case=MONEY, response=text(RIGHT), label="wrong"),
        "wrong": envelope(lane="model", case=MONEY, response=text("ANSWER: $1.00")),
        "abstain": envelope(lane="product", case=ABSTAIN, response=text("ABSTAIN: no such")),
        "no_line": envelope(lane="product", case=MONEY, response=text("It is about 26.")),
        "drop": envelope(
            lane="product", case=MONEY, response=None, status="infra_error", failure_cause="5xx"
        ),
        "drop_no_cause": envelope(lane="product", case=MONEY, response=None, status="infra_error"),
        "drop_budget_cause": envelope(
            lane="product",
            case=MONEY,
            response=None,
            status="infra_error",
            failure_cause="budget",
        ),
        "retried_final": envelope(
            lane="product", case=MONEY, response=None, status="retried", failure_cause="429"
        ),
        "harness": envelope(
            lane="product",
            case=MONEY,
            response=None,
            status="harness_error",
            failure_cause="harness_4xx",
            label="drop",
            label_reason="old",
            answer="26.74",
            drop_cause="5xx",
        ),
        "budget": envelope(
            lane="product", case=MONEY, response=None, status="budget_stopped", label="schema"
        ),
        "no_response": envelope(lane="product", case=MONEY, response=None),
        "body_problem": envelope(
            lane="product",
            case=MONEY,
            response=ModelResponse(text=RIGHT, stop_kind="end", body_problem="no_choices"),
        ),
        "cut": envelope(
            lane="product",
            case=MONEY,
            response=ModelResponse(text=RIGHT, stop_kind="max_tokens", finish_reason="length"),
        ),
        "cut_no_reason": envelope(
            lane="product",
            case=MONEY,
            response=ModelResponse(text="", stop_kind="max_tokens", finish_reason=None),
        ),
        "tool_step": envelope(lane="product", case=MONEY, response=tool_step),
        "tool_and_answer": envelope(
            lane="product", case=MONEY, response=tool_step.model_copy(update={"text": RIGHT})
        ),
        "tool_and_prose": envelope(
            lane="product", case=MONEY, response=tool_step.model_copy(update={"text": "Looking."})
        ),
        "bad_tools": envelope(lane="model", case=RUN_SQL, response=two_calls),
        "json": envelope(
            lane="product",
            case=JSON_CASE,
            response=text("```json\n" + json.dumps(JSON_EXPECTED) + "\n```"),
        ),
        "json_none": envelope(lane="product", case=JSON_CASE, response=text("no JSON here")),
    }
    con, report = relabelled(tmp_path, list(items.values()))
    got = stored(con)
    by_name = {name: got[item.envelope_id] for name, item in items.items()}
    assert by_name["right"] == (None, NOT_GRADED, f"${MONEY.expected}", None)
    assert by_name["wrong"] == (None, NOT_GRADED, "$1.00", None)
    assert by_name["abstain"] == (None, NOT_GRADED, "ABSTAIN: no such", None)
    assert by_name["no_line"] == ("schema", "schema: no answer line in the text", None, None)
    assert by_name["drop"] == ("drop", "drop: 5xx", None, "5xx")
    assert by_name["drop_no_cause"] == ("drop", "drop: None", None, None)
    assert by_name["drop_budget_cause"] == ("drop", "drop: None", None, None)
    assert by_name["retried_final"] == ("drop", "drop: 429", None, "429")
    assert by_name["harness"] == (None, "harness_error", None, None)
    assert by_name["budget"] == (None, "budget_stopped", None, None)
    assert by_name["no_response"] == ("empty", "empty: no response", None, None)
    assert by_name["body_problem"] == ("empty", "empty: no_choices", None, None)
    assert by_name["cut"] == ("truncated", "truncated: stop reason 'length'", None, None)
    assert by_name["cut_no_reason"] == ("truncated", "truncated: stop reason None", None, None)
    assert by_name["tool_step"] == (None, NOT_GRADED, None, None)
    assert by_name["tool_and_answer"] == (None, NOT_GRADED, READ, None)
    assert by_name["tool_and_prose"] == (None, NOT_GRADED, None, None)  # a step, not a schema
    assert by_name["bad_tools"] == (
        "schema",
        "schema: arguments of 'run_sql' are not a JSON object",
        None,
        None,
    )
    assert by_name["json"] == (
        None,
        NOT_GRADED,
        json.dumps(JSON_EXPECTED, sort_keys=True, separators=(",", ":")),
        None,
    )
    assert by_name["json_none"] == ("schema", "schema: no JSON answer in the reply", None, None)
    assert got == one_by_one(con, cases_for)[0]
    assert report.relabelled == len(items)


def test_the_first_malformed_call_of_a_reply_names_its_problem_in_the_order_made(
    tmp_path: Path,
) -> None:
    def reply(*pairs: tuple[str, str]) -> ModelResponse:
        return ModelResponse(
            tool_calls=tuple(
                ToolCall(id=f"c{i}", name=name, arguments=args)
                for i, (name, args) in enumerate(pairs)
            ),
            stop_kind="tool_use",
        )

    good = ("run_sql", '{"query": "SELECT 1"}')
    not_json = ("run_sql", '{"query": ')
    unknown = ("drop_tables", "{}")
    items = [
        envelope(lane="model", case=RUN_SQL, response=reply(good, not_json, unknown)),
        envelope(lane="model", case=RUN_SQL, response=reply(unknown, not_json)),
        envelope(lane="model", case=RUN_SQL, response=reply(good, good)),
        envelope(lane="model", case=RUN_SQL, response=reply(not_json)),
    ]
    con, _ = relabelled(tmp_path, items)
    got = stored(con)
    assert [got[e.envelope_id][:2] for e in items] == [
        ("schema", "schema: arguments of 'run_sql' are not valid JSON"),
        ("schema", "schema: tool 'drop_tables' was not offered"),
        (None, NOT_GRADED),
        ("schema", "schema: arguments of 'run_sql' are not valid JSON"),
    ]


def test_only_final_envelopes_of_the_model_and_product_lanes_are_relabelled(
    tmp_path: Path,
) -> None:
    final = envelope(lane="product", case=MONEY, response=text(RIGHT), label="wrong")
    earlier = envelope(
        lane="product", case=MONEY, response=text(RIGHT), label="wrong", final=False, attempt=2
    )
    judge = envelope(lane="judge", case=MONEY, response=text("VERDICT: PASS"), label="wrong")
    judge_2 = envelope(lane="judge", case=MONEY, response=text("VERDICT: FAIL"))
    planted = envelope(lane="calibration", case=MONEY, response=text(RIGHT), label="wrong")
    not_final = envelope(lane="calibration", case=MONEY, response=None, final=False)
    con, report = relabelled(tmp_path, [final, earlier, judge, judge_2, planted, not_final])
    rows = dict(con.execute(f"SELECT envelope_id, label FROM {TABLE}").fetchall())
    assert rows == {
        final.envelope_id: None,
        earlier.envelope_id: "wrong",
        judge.envelope_id: "wrong",
        judge_2.envelope_id: None,
        planted.envelope_id: "wrong",
        not_final.envelope_id: None,
    }
    assert (report.relabelled, report.changed) == (1, 1)
    assert report.skipped == {"calibration": 1, "judge": 2}
    assert list(report.skipped) == ["calibration", "judge"]


def test_envelopes_with_a_case_run_are_relabelled_beside_those_without_which_are_counted(
    tmp_path: Path,
) -> None:
    matched = envelope(lane="product", case=MONEY, response=text(RIGHT), label="wrong")
    orphans = [
        envelope(
            lane="product", case=MONEY, response=text(RIGHT), label="wrong", run_id=f"gone-{i}"
        )
        for i in range(2)
    ]
    con = warehouse(tmp_path)
    store(tmp_path, con, [matched])
    insert_envelopes(con, orphans)  # their case runs never loaded
    report = relabel_envelopes(con, cases_for)
    labels = dict(con.execute(f"SELECT envelope_id, label FROM {TABLE}").fetchall())
    assert labels == {matched.envelope_id: None, **{o.envelope_id: "wrong" for o in orphans}}
    assert (report.relabelled, report.changed, report.unmatched) == (1, 1, 2)
    assert report.lines()[0] == (
        "re-labelled 1 final lane calls; 2 without a case run left as they are"
    )


def test_a_warehouse_where_nothing_was_called_relabels_nothing_and_creates_nothing(
    tmp_path: Path,
) -> None:
    con = warehouse(tmp_path)
    report = relabel_envelopes(con, cases_for)
    assert report == RelabelReport(
        relabelled=0, changed=0, transitions=(), examples=(), grades=(), skipped={}, unmatched=0
    )
    assert not has_table(con, TABLE)
    assert report.lines() == ["re-labelled 0 final lane calls", "no call label changed"]


def test_envelopes_with_no_case_runs_table_at_all_are_all_unmatched(tmp_path: Path) -> None:
    con = warehouse(tmp_path)
    items = [envelope(lane="product", case=MONEY, response=text(RIGHT), label="wrong")]
    insert_envelopes(con, items)
    report = relabel_envelopes(con, cases_for)
    assert (report.relabelled, report.changed, report.unmatched) == (0, 0, 1)
    assert con.execute(f"SELECT label FROM {TABLE}").fetchall() == [("wrong",)]


# -- the report -----------------------------------------------------------------------------


def test_transitions_are_counted_most_first_then_by_old_and_new_label_unlabelled_last(
    tmp_path: Path,
) -> None:
    def item(label: str | None, response: ModelResponse | None, **extra: object) -> CallEnvelope:
        return envelope(lane="product", case=MONEY, response=response, label=label, **extra)  # type: ignore[arg-type]

    drop = {"status": "infra_error", "failure_cause": "5xx", "label_reason": "drop: 5xx"}
    items = [
        *(item("wrong", text(RIGHT)) for _ in range(3)),  # wrong -> None: 3 changed
        item(None, text("no line"), label_reason="x"),  # None -> schema
        item("right", text("no line")),  # right -> schema
        item("drop", None, drop_cause="5xx", **drop),  # drop -> drop, unchanged
        item("drop", None, **drop),  # drop -> drop, its drop cause put back
        item(None, text(RIGHT), label_reason=NOT_GRADED, answer=READ),  # unchanged
        item("empty", text("no line")),  # empty -> schema: ties with right -> schema
    ]
    con, report = relabelled(tmp_path, items)
    assert report.transitions == (
        Transition(old="wrong", new=None, count=3, changed=3),
        Transition(old="drop", new="drop", count=2, changed=1),
        Transition(old="empty", new="schema", count=1, changed=1),  # ties: old label A-Z
        Transition(old="right", new="schema", count=1, changed=1),
        Transition(old=None, new="schema", count=1, changed=1),
        Transition(old=None, new=None, count=1, changed=0),
    )
    assert report.counts() == {
        ("wrong", None): 3,
        ("drop", "drop"): 2,
        ("empty", "schema"): 1,
        ("right", "schema"): 1,
        (None, None): 1,
        (None, "schema"): 1,
    }
    assert report.changed == 7
    # examples: the most changed transition first, then rows in order (each transition's
    # change count joined back to its examples, an unlabelled old label included)
    rowid = dict(con.execute(f"SELECT envelope_id, rowid FROM {TABLE}").fetchall())
    once = sorted((items[3], items[4], items[6], items[8]), key=lambda e: rowid[e.envelope_id])
    assert [(e.old, e.new) for e in report.examples[:3]] == [("wrong", None)] * 3
    assert [e.envelope_id for e in report.examples[3:]] == [e.envelope_id for e in once]


def test_examples_are_a_few_per_transition_from_the_most_changed_first_in_row_order(
    tmp_path: Path,
) -> None:
    wrongs = [
        envelope(lane="product", case=MONEY, response=text(RIGHT), label="wrong") for _ in range(4)
    ]
    rights = [
        envelope(lane="product", case=MONEY, response=text("no line"), label="right")
        for _ in range(2)
    ]
    schema = envelope(lane="product", case=MONEY, response=text(RIGHT), label="schema", answer=READ)
    items = [rights[0], *wrongs, rights[1], schema]

    def in_row_order(con: duckdb.DuckDBPyConnection, group: list[CallEnvelope]) -> list[str]:
        """The group's envelope ids in the warehouse's row order (which a load does not
        keep from one warehouse to the next: each is read from its own)."""
        ids = {e.envelope_id for e in group}
        rows = con.execute(f"SELECT envelope_id FROM {TABLE} ORDER BY rowid").fetchall()
        return [row[0] for row in rows if row[0] in ids]

    con, report = relabelled(tmp_path, items)
    assert [e.envelope_id for e in report.examples] == [
        *in_row_order(con, wrongs)[:3],  # 4 changes: the 3 first rows
        *in_row_order(con, rights),  # 2 changes
        schema.envelope_id,  # 1 change
    ]
    first = report.examples[0]
    source = next(e for e in wrongs if e.envelope_id == first.envelope_id)
    assert first == LabelChange(
        envelope_id=source.envelope_id,
        call_id=source.call_id,
        lane="product",
        model="m",
        case_id=MONEY.case_id,
        old="wrong",
        new=None,
        old_reason=None,
        new_reason=NOT_GRADED,
        old_answer=None,
        new_answer=READ,
        reason=f"{NOT_GRADED}; answer read {READ!r}, stored None",
    )
    right_example = report.examples[3]
    assert (right_example.old, right_example.new, right_example.reason) == (
        "right",
        "schema",
        "schema: no answer line in the text",
    )
    last = report.examples[-1]
    assert (last.old, last.old_answer, last.new_answer) == ("schema", READ, READ)
    assert last.reason == NOT_GRADED  # the answer did not change
    (tmp_path / "capped").mkdir()
    capped_con, capped = relabelled(tmp_path / "capped", items, max_examples=4)
    assert [e.envelope_id for e in capped.examples] == [
        *in_row_order(capped_con, wrongs)[:3],
        in_row_order(capped_con, rights)[0],
    ]


def test_each_transition_has_its_own_examples_when_two_share_their_old_label(
    tmp_path: Path,
) -> None:
    answered = [
        envelope(lane="product", case=MONEY, response=text(RIGHT), label="wrong") for _ in range(3)
    ]
    no_line = [
        envelope(lane="product", case=MONEY, response=text("no line"), label="wrong")
        for _ in range(3)
    ]
    _, report = relabelled(tmp_path, [*answered, *no_line])
    assert report.counts() == {("wrong", None): 3, ("wrong", "schema"): 3}
    # three examples of each, not three of the old label `wrong`
    assert Counter((e.old, e.new) for e in report.examples) == {
        ("wrong", None): 3,
        ("wrong", "schema"): 3,
    }
    assert {e.envelope_id for e in report.examples} == {
        e.envelope_id for e in (*answered, *no_line)
    }


def test_grades_are_counted_per_lane_and_model_in_order(tmp_path: Path) -> None:
    items = [
        envelope(lane="product", model="z", case=MONEY, response=text(RIGHT)),
        envelope(lane="product", model="z", case=MONEY, response=text(RIGHT)),
        envelope(lane="product", model="z", case=MONEY, response=text("ANSWER: $2")),
        envelope(lane="product", model="a", case=MONEY, response=text("nothing")),
        envelope(lane="model", model="z", case=ABSTAIN, response=text("ABSTAIN: no")),
        envelope(lane="model", model="z", case=MONEY, response=None, status="infra_error"),
        envelope(lane="model", model="z", case=MONEY, response=text("ABSTAIN: unsure")),
    ]
    _, report = relabelled(tmp_path, items)
    assert report.grades == (
        GradeCount(lane="model", model="z", right=1, wrong=1, no_answer=1),
        GradeCount(lane="product", model="a", right=0, wrong=0, no_answer=1),
        GradeCount(lane="product", model="z", right=2, wrong=1, no_answer=0),
    )


def test_the_report_lines_name_every_count_transition_example_and_grade() -> None:
    example = LabelChange(
        envelope_id="e",
        call_id="call-7",
        lane="product",
        model="m",
        case_id="case-1",
        old="wrong",
        new="schema",
        old_reason=NOT_GRADED,
        new_reason="schema: no answer line in the text",
        old_answer="1",
        new_answer=None,
        reason="schema: no answer line in the text; answer read None, stored '1'",
    )
    report = RelabelReport(
        relabelled=5,
        changed=2,
        transitions=(
            Transition(old=None, new=None, count=3, changed=0),
            Transition(old=None, new="schema", count=1, changed=1),
            Transition(old="wrong", new=None, count=1, changed=1),
        ),
        examples=(example,),
        grades=(GradeCount(lane="product", model="m", right=2, wrong=1, no_answer=2),),
        skipped={"calibration": 2, "judge": 1},
        unmatched=4,
    )
    assert report.lines() == [
        "re-labelled 5 final lane calls (other lanes left as they are: calibration 2, judge 1)"
        "; 4 without a case run left as they are",
        "2 call label(s) changed (old -> new):",
        "  unlabelled -> schema: 1",
        "  wrong -> unlabelled: 1",
        "  product/m call-7 case-1: wrong -> schema "
        "(schema: no answer line in the text; answer read None, stored '1')",
        "tier 1 per call, product/m: right 2, wrong 1, no answer 2",
    ]
    quiet = report.model_copy(
        update={"changed": 0, "examples": (), "skipped": {}, "unmatched": 0, "grades": ()}
    )
    assert quiet.lines() == ["re-labelled 5 final lane calls", "no call label changed"]


# -- errors name the row --------------------------------------------------------------------


def test_an_unknown_status_is_named_even_without_case_runs(tmp_path: Path) -> None:
    con = warehouse(tmp_path)
    item = envelope(lane="product", case=MONEY, response=text("ANSWER: 1"))
    insert_envelopes(con, [item])
    con.execute(f"UPDATE {TABLE} SET status = 'exploded'")
    message = (
        f"{TABLE}: envelope {item.envelope_id} has status 'exploded', "
        f"not one of {', '.join(STATUSES)}"
    )
    with pytest.raises(RelabelError, match=f"^{re.escape(message)}$"):
        relabel_envelopes(con, cases_for)


def test_of_several_unknown_statuses_one_is_named_never_a_known_status_read_first(
    tmp_path: Path,
) -> None:
    con = warehouse(tmp_path)
    insert_envelopes(
        con, [envelope(lane="product", case=MONEY, response=text("ANSWER: 1")) for _ in range(6)]
    )
    rows = con.execute(f"SELECT envelope_id FROM {TABLE} ORDER BY rowid").fetchall()
    unknown = {rows[4][0]: "exploded", rows[5][0]: "vanished"}  # the last two rows
    for envelope_id, status in unknown.items():
        con.execute(f"UPDATE {TABLE} SET status = ? WHERE envelope_id = ?", [status, envelope_id])
    statuses = con.execute(f"SELECT status FROM {TABLE} ORDER BY rowid").fetchall()
    assert [row[0] for row in statuses] == ["ok", "ok", "ok", "ok", "exploded", "vanished"]
    named = {
        f"{TABLE}: envelope {envelope_id} has status {status!r}, not one of {', '.join(STATUSES)}"
        for envelope_id, status in unknown.items()
    }
    with pytest.raises(RelabelError) as raised:
        relabel_envelopes(con, cases_for)
    assert str(raised.value) in named


def test_a_case_not_in_its_fixture_set_is_named_with_the_fixture_set(tmp_path: Path) -> None:
    con = warehouse(tmp_path)
    stray = envelope(lane="product", case=MONEY, response=text("ANSWER: 1"))
    store(tmp_path, con, [stray])
    message = (
        f"envelope {stray.envelope_id}: case {MONEY.case_id!r} is not in fixture set "
        f"{FIXTURES.fixture_id} (the fixture set its run names in runs.case_runs)"
    )
    with pytest.raises(RelabelError, match=f"^{re.escape(message)}$"):
        relabel_envelopes(con, lambda _: {JSON_CASE.case_id: JSON_CASE})


def test_two_fixture_sets_for_one_run_and_case_are_named_in_order(tmp_path: Path) -> None:
    con = warehouse(tmp_path)
    item = envelope(lane="product", case=MONEY, response=text("ANSWER: 1"), run_id="run-x")
    other = envelope(lane="product", case=ABSTAIN, response=text("ANSWER: 1"), run_id="run-x")
    store(tmp_path, con, [item, other])
    con.execute(
        "INSERT INTO runs.case_runs BY NAME SELECT * REPLACE "
        "('fx-0' AS fixture_id, 2 AS attempt) FROM runs.case_runs WHERE case_id = ?",
        [MONEY.case_id],
    )
    fixtures = sorted(["fx-0", FIXTURES.fixture_id])
    message = (
        f"runs.case_runs: run run-x case {MONEY.case_id} names several fixture sets {fixtures}"
    )
    with pytest.raises(RelabelError, match=f"^{re.escape(message)}$"):
        relabel_envelopes(con, lambda _: cases_for(FIXTURES.fixture_id))


def test_an_unreadable_response_is_named_and_a_readable_one_beside_it_is_not(
    tmp_path: Path,
) -> None:
    con = warehouse(tmp_path)
    good = envelope(lane="product", case=MONEY, response=text("ANSWER: 1"), label="wrong")
    bad = envelope(lane="product", case=MONEY, response=text("ANSWER: 2"))
    skipped = envelope(lane="judge", case=MONEY, response=text("x"))
    store(tmp_path, con, [good, bad, skipped])
    con.execute(
        f"UPDATE {TABLE} SET response_json = '[1, ' WHERE envelope_id = ?", [skipped.envelope_id]
    )
    con.execute(
        f"UPDATE {TABLE} SET response_json = '{{\"text\": 1' WHERE envelope_id = ?",
        [bad.envelope_id],
    )
    message = f"{TABLE}: envelope {bad.envelope_id}: response_json is not valid JSON"
    with pytest.raises(RelabelError, match=f"^{re.escape(message)}$"):
        relabel_envelopes(con, cases_for)
    assert con.execute(
        f"SELECT label FROM {TABLE} WHERE envelope_id = ?", [good.envelope_id]
    ).fetchall() == [("wrong",)]
    # a later run in the same connection starts a transaction of its own
    con.execute(f"UPDATE {TABLE} SET response_json = NULL WHERE envelope_id = ?", [bad.envelope_id])
    assert relabel_envelopes(con, cases_for).changed == 2
    assert table(con).height == 3


def test_a_stored_response_without_its_optional_fields_reads_as_one_with_no_tool_calls(
    tmp_path: Path,
) -> None:
    """`ModelResponse` defaults a missing `tool_calls` to none; the bulk read gets a null
    list there and must count it as no calls, not as a call to check."""
    con = warehouse(tmp_path)
    answered = envelope(lane="product", case=MONEY, response=text(RIGHT), label="wrong")
    prose = envelope(lane="product", case=MONEY, response=text("no line"))
    store(tmp_path, con, [answered, prose])
    for item, reply in ((answered, RIGHT), (prose, "no line")):
        con.execute(
            f"UPDATE {TABLE} SET response_json = ? WHERE envelope_id = ?",
            [json.dumps({"text": reply}), item.envelope_id],
        )
    relabel_envelopes(con, cases_for)
    got = stored(con)
    assert got[answered.envelope_id] == (None, NOT_GRADED, READ, None)
    assert got[prose.envelope_id] == ("schema", "schema: no answer line in the text", None, None)
    assert got == one_by_one(con, cases_for)[0]
