"""Bulk re-labelling of stored envelopes: exactly what the lanes store at call time
(`classify` without a grader, with the case's reader), written back once; the tier-1
grades counted with the scorer's own `grade_answer`."""

from __future__ import annotations

import itertools
import json
import re
import subprocess
import sys
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from datetime import date, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import duckdb
import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from eval_pipeline import paths
from eval_pipeline.cases.case import Case
from eval_pipeline.cases.readers import (
    ANSWER_SUFFIX_REGEX,
    ANSWER_TAGS,
    TAG_LETTERS,
    answer_text,
    grade_answer,
    reader_for,
)
from eval_pipeline.journal import Journal
from eval_pipeline.lane_records import CaseRun
from eval_pipeline.lanes.lane_tables import load_partition_records
from eval_pipeline.lanes.partition_runs import CASES_JOURNAL
from eval_pipeline.providers.envelope import JOURNAL_NAME, CallEnvelope, EnvelopeJournal
from eval_pipeline.providers.labels import CallStatus, FailureCause, Label, classify
from eval_pipeline.providers.types import Message, ModelRequest, ModelResponse, ToolCall, ToolSpec
from eval_pipeline.scoring.grading import cases_under
from eval_pipeline.scoring.relabel import RelabelError, RelabelReport, relabel_envelopes
from eval_pipeline.warehouse.envelopes import COLUMN_NAMES, TABLE, insert_envelopes, read_envelopes
from eval_pipeline_tests.cases.committed import committed_fixture_set
from eval_pipeline_tests.scoring.cases import make_case
from eval_pipeline_tests.scoring.test_json_answers import EXPECTED as JSON_EXPECTED
from eval_pipeline_tests.scoring.test_json_answers import json_case

FIXTURES = committed_fixture_set()
TOOLS = tuple(ToolSpec.model_validate(tool) for tool in FIXTURES.tools)
COMMITTED_CASES = cases_under(paths.FIXTURES_DIR)
JSON_CASE = json_case().model_copy(update={"case_id": "json-payout"})
"""The committed set has no JSON-answer case; the tests add one to it."""


def cases_for(fixture_id: str) -> Mapping[str, Case]:
    return {**COMMITTED_CASES(fixture_id), JSON_CASE.case_id: JSON_CASE}


ALL_CASES = (*FIXTURES.cases, JSON_CASE)


def _case(kind: str, *, first_call: str | None = None) -> Case:
    return next(
        c
        for c in FIXTURES.cases
        if c.answer_kind == kind
        and (
            first_call is None
            or (c.expected_first_call and c.expected_first_call.name == first_call)
        )
    )


MONEY = _case("money")
ABSTAIN = _case("abstain")
RUN_SQL = _case("integer", first_call="run_sql")


def request(case: Case, seed: int = 0) -> ModelRequest:
    return ModelRequest(
        messages=(Message(role="system", content="s"), Message(role="user", content=case.prompt)),
        tools=TOOLS,
        max_tokens=1024,
        seed=seed,
        replicate=seed,
    )


_ids = itertools.count()


def envelope(
    *,
    lane: str,
    case: Case,
    response: ModelResponse | None,
    status: CallStatus = "ok",
    failure_cause: FailureCause | None = None,
    label: Label | None = None,
    label_reason: str | None = None,
    answer: str | None = None,
    drop_cause: str | None = None,
    run_id: str | None = None,
    final: bool = True,
    attempt: int = 1,
    call_id: str | None = None,
    model: str = "m",
) -> CallEnvelope:
    number = next(_ids)
    run_id = run_id or f"run-{lane}"
    call_id = call_id or f"call-{number:05d}"
    return CallEnvelope(
        envelope_id=f"{run_id}/{call_id}/{attempt}",
        run_id=run_id,
        call_id=call_id,
        attempt=attempt,
        final=final,
        request_hash="h",
        lane=lane,
        case_id=case.case_id,
        turn=0,
        seed=0,
        replicate=0,
        model=model,
        provider="simulated",
        api="openai_compatible",
        wire_model="m",
        started_at=datetime(2026, 1, 5, 9, 0, number % 60),
        call_day=date(2026, 1, 5),
        elapsed_ms=12.5,
        status=status,
        http_status=200 if status == "ok" else None,
        failure_cause=failure_cause,
        failure_detail=None,
        retry_after_ms=None,
        backoff_ms=None,
        finish_reason=response.finish_reason if response else None,
        stop_kind=response.stop_kind if response else None,
        input_tokens=10,
        output_tokens=5,
        price_model="m",
        price_tier="t",
        cost_usd=Decimal("0.000123"),
        reserved_usd=Decimal("0.01"),
        label=label,
        label_reason=label_reason,
        drop_cause=drop_cause,  # type: ignore[arg-type]
        answer=answer,
        cache_status="off",
        request_json=request(case).model_dump_json(),
        response_body=None if response is None else "{}",
        response_json=None if response is None else response.model_dump_json(),
    )


def case_run(run_id: str, lane: str, case_id: str, fixture_id: str) -> CaseRun:
    return CaseRun(
        run_id=run_id,
        lane=lane,  # type: ignore[arg-type]
        model="m",
        seed=0,
        case_id=case_id,
        attempt=1,
        fixture_id=fixture_id,
        settings_hash="s",
        status="completed",
        end_reason="final_answer",
        final_text=None,
        turns=1,
        tool_calls=0,
        guard_firings={},
        call_ids=(),
        cost_usd=Decimal(0),
        input_tokens=0,
        output_tokens=0,
        elapsed_ms=1.0,
        started_at="2026-01-05T09:00:00",
    )


def store(
    root: Path,
    con: duckdb.DuckDBPyConnection,
    envelopes: Sequence[CallEnvelope],
    fixture_id: str = FIXTURES.fixture_id,
) -> None:
    """Journal the envelopes and their case runs and load them as a lane partition does."""
    folder = root / "partition"
    folder.mkdir(parents=True, exist_ok=True)
    runs_root = root / "runs"
    keys = sorted(
        {(e.run_id, e.lane, e.case_id) for e in envelopes if e.lane in ("model", "product")}
    )
    with Journal[CaseRun](folder / CASES_JOURNAL) as journal:
        for run_id, lane, case_id in keys:
            journal.append(case_run(run_id, lane, case_id, fixture_id))
    for run_id in sorted({e.run_id for e in envelopes}):
        with EnvelopeJournal(runs_root / run_id / JOURNAL_NAME) as journal:
            for item in envelopes:
                if item.run_id == run_id:
                    journal.append(item)
    load_partition_records([folder], runs_root, con)
    lone = [e for e in envelopes if e.lane not in ("model", "product")]
    insert_envelopes(con, lone)


def table(con: duckdb.DuckDBPyConnection) -> pl.DataFrame:
    return con.execute(f"SELECT {', '.join(COLUMN_NAMES)} FROM {TABLE} ORDER BY envelope_id").pl()


def text(value: str, stop_kind: str = "end") -> ModelResponse:
    return ModelResponse(text=value, stop_kind=stop_kind, finish_reason="stop")  # type: ignore[arg-type]


def calls(name: str, arguments: str) -> ModelResponse:
    return ModelResponse(
        tool_calls=(ToolCall(id="c1", name=name, arguments=arguments),),
        stop_kind="tool_use",
        finish_reason="tool_calls",
    )


Expected = tuple[dict[str, tuple[Any, ...]], dict[tuple[str, str], tuple[int, int, int]]]


def one_by_one(
    con: duckdb.DuckDBPyConnection, cases: Callable[[str], Mapping[str, Case]]
) -> Expected:
    """Every final lane envelope labelled one at a time as the lanes label a call
    (`classify` without a grader, the case's reader), and its tier-1 grade counted with
    `grade_answer` per (lane, model): (right, wrong, no answer)."""
    fixture_of = dict(
        con.execute(
            "SELECT DISTINCT run_id || '/' || case_id, fixture_id FROM runs.case_runs"
        ).fetchall()
    )
    labels = {}
    grades: Counter[tuple[str, str, str]] = Counter()
    for item in read_envelopes(con, where="final AND lane IN ('model', 'product')"):
        case = cases(fixture_of[f"{item.run_id}/{item.case_id}"])[item.case_id]
        response = item.response()
        result = classify(
            item.status,
            response,
            item.request().tools,
            failure_cause=item.failure_cause,
            read_answer=reader_for(case),
        )
        labels[item.envelope_id] = (result.label, result.reason, result.answer, result.drop_cause)
        if result.answer is None:
            grades[(item.lane, item.model, "no_answer")] += 1
        else:
            assert response is not None
            right = grade_answer(case, response.text).correct
            grades[(item.lane, item.model, "right" if right else "wrong")] += 1
    keys = {(lane, model) for lane, model, _ in grades}
    return labels, {
        key: (grades[(*key, "right")], grades[(*key, "wrong")], grades[(*key, "no_answer")])
        for key in keys
    }


def stored(con: duckdb.DuckDBPyConnection) -> dict[str, tuple[Any, ...]]:
    rows = con.execute(
        f"SELECT envelope_id, label, label_reason, answer, drop_cause FROM {TABLE} "
        "WHERE final AND lane IN ('model', 'product')"
    ).fetchall()
    return {row[0]: tuple(row[1:]) for row in rows}


def grade_counts(report: RelabelReport) -> dict[tuple[str, str], tuple[int, int, int]]:
    return {(g.lane, g.model): (g.right, g.wrong, g.no_answer) for g in report.grades}


NOT_GRADED = "well-formed, not graded"
OLD_NO_LINE = "schema: no answer line in the text"


# -- an older reader's labels are put right, nothing else changes -------------------------


def test_labels_of_an_older_reader_are_relabelled_and_reported(tmp_path: Path) -> None:
    money = MONEY.expected
    fenced = "Here it is:\n```json\n" + json.dumps(JSON_EXPECTED, indent=2) + "\n```"
    olds = {
        # graded at call time by an older classifier that compared strings
        "money": envelope(
            lane="product",
            case=MONEY,
            response=text(f"Summed the clean lines.\nANSWER: ${money}"),
            label="wrong",
            label_reason="graded wrong",
            answer=f"${money}",
        ),
        # an older reader read no ABSTAIN line
        "abstained": envelope(
            lane="product",
            case=ABSTAIN,
            response=text("No such artist in the records.\nABSTAIN: no such artist\nANSWER: N/A"),
            label="schema",
            label_reason=OLD_NO_LINE,
        ),
        "bold": envelope(
            lane="product",
            case=MONEY,
            response=text(f"**ANSWER:** {money}"),
            label="schema",
            label_reason=OLD_NO_LINE,
        ),
        "json": envelope(
            lane="product",
            case=JSON_CASE,
            response=text(fenced),
            label="schema",
            label_reason=OLD_NO_LINE,
        ),
        "cut_off": envelope(
            lane="product",
            case=MONEY,
            response=ModelResponse(
                text="", stop_kind="max_tokens", finish_reason="length", body_problem="empty_reply"
            ),
            label="empty",
            label_reason="empty: empty_reply",
        ),
        "run_sql": envelope(
            lane="model",
            case=RUN_SQL,
            response=calls("run_sql", json.dumps({"query": "SELECT count(*) FROM tracks"})),
            label="wrong",
            label_reason="graded wrong",
        ),
    }
    unchanged = [
        envelope(
            lane="product",
            case=MONEY,
            response=text(f"ANSWER: {money}"),
            label_reason=NOT_GRADED,
            answer=money,
        ),
        envelope(
            lane="product",
            case=MONEY,
            response=text("ANSWER: $1.00"),
            label_reason=NOT_GRADED,
            answer="$1.00",
        ),
        envelope(
            lane="product",
            case=MONEY,
            response=calls("calculate_royalties", '{"artist_id": "ART-0001", "period": "2025-01"}'),
            label_reason=NOT_GRADED,
        ),
        envelope(
            lane="product",
            case=MONEY,
            response=None,
            status="infra_error",
            failure_cause="5xx",
            label="drop",
            label_reason="drop: 5xx",
            drop_cause="5xx",
        ),
        # a retried (non-final) attempt keeps the harness's own reason
        envelope(
            lane="model",
            case=RUN_SQL,
            response=None,
            status="retried",
            failure_cause="429",
            label=None,
            label_reason="retried after 429",
            final=False,
            call_id="call-retried",
        ),
        # other lanes are read elsewhere: left exactly as stored
        envelope(
            lane="judge",
            case=MONEY,
            response=text("PASS"),
            label="schema",
            label_reason="schema: x",
        ),
        envelope(
            lane="calibration",
            case=MONEY,
            response=text("ANSWER: 42"),
            label="right",
            label_reason="graded right",
            answer="42",
        ),
    ]
    con = duckdb.connect(str(tmp_path / "warehouse.duckdb"))
    store(tmp_path, con, [*olds.values(), *unchanged])
    before = table(con)

    report = relabel_envelopes(con, cases_for)

    after = table(con)
    new = {
        key: after.filter(pl.col("envelope_id") == e.envelope_id).row(0, named=True)
        for key, e in olds.items()
    }

    def got(key: str) -> tuple[Any, ...]:
        return new[key]["label"], new[key]["label_reason"], new[key]["answer"]

    assert got("money") == (None, NOT_GRADED, f"${money}")
    assert got("abstained") == (None, NOT_GRADED, "ABSTAIN: no such artist")
    assert got("bold") == (None, NOT_GRADED, money)
    assert got("json") == (
        None,
        NOT_GRADED,
        json.dumps(JSON_EXPECTED, sort_keys=True, separators=(",", ":")),
    )
    assert got("cut_off") == ("truncated", "truncated: stop reason 'length'", None)
    assert got("run_sql") == (None, NOT_GRADED, None)

    # nothing else changed: not another row, not another column
    changed_ids = {e.envelope_id for e in olds.values()}
    label_columns = ["label", "label_reason", "answer", "drop_cause"]
    assert after.drop(label_columns).equals(before.drop(label_columns))
    keep = pl.col("envelope_id").is_in(changed_ids).not_()
    assert after.filter(keep).equals(before.filter(keep))

    assert report.changed == len(olds)
    assert report.relabelled == len(olds) + 4  # final model/product envelopes
    assert report.skipped == {"calibration": 1, "judge": 1}
    assert report.unmatched == 0
    counts = report.counts()
    assert counts[("wrong", None)] == 2
    assert counts[("schema", None)] == 3
    assert counts[("empty", "truncated")] == 1
    assert counts[(None, None)] == 3
    assert {(t.old, t.new): t.changed for t in report.transitions}[(None, None)] == 0
    examples = {e.envelope_id: e for e in report.examples}
    assert set(examples) == changed_ids
    bold = examples[olds["bold"].envelope_id]
    assert (bold.call_id, bold.case_id, bold.lane, bold.old, bold.new) == (
        olds["bold"].call_id,
        MONEY.case_id,
        "product",
        "schema",
        None,
    )
    assert bold.reason == f"{NOT_GRADED}; answer read {money!r}, stored None"
    assert examples[olds["money"].envelope_id].reason == NOT_GRADED

    # the replies read against their cases: $26.74, the abstention, the bold line and the
    # JSON block are right; $1.00 is wrong; the cut-off, the tool step and the drop carry
    # no answer
    assert grade_counts(report) == {("model", "m"): (0, 0, 1), ("product", "m"): (5, 1, 3)}

    # what was written is exactly what classify gives, one envelope at a time
    labels, grades = one_by_one(con, cases_for)
    assert stored(con) == labels
    assert grade_counts(report) == grades

    again = relabel_envelopes(con, cases_for)
    assert again.changed == 0 and again.examples == ()
    assert again.grades == report.grades
    assert table(con).equals(after)


def test_a_case_missing_from_its_fixture_set_is_an_error_and_nothing_is_written(
    tmp_path: Path,
) -> None:
    con = duckdb.connect(str(tmp_path / "warehouse.duckdb"))
    good = envelope(
        lane="product", case=MONEY, response=text(f"ANSWER: ${MONEY.expected}"), label="wrong"
    )
    stray_case = make_case(case_id="not-in-the-set")
    stray = envelope(lane="product", case=stray_case, response=text("ANSWER: 1"), label="wrong")
    store(tmp_path, con, [good, stray])
    before = table(con)
    with pytest.raises(RelabelError, match=r"case 'not-in-the-set' is not in fixture set fx-"):
        relabel_envelopes(con, cases_for)
    assert table(con).equals(before)


def test_case_runs_naming_two_fixture_sets_for_one_case_are_an_error(tmp_path: Path) -> None:
    con = duckdb.connect(str(tmp_path / "warehouse.duckdb"))
    item = envelope(lane="product", case=MONEY, response=text("ANSWER: 1"), run_id="run-x")
    store(tmp_path, con, [item])
    con.execute(
        "INSERT INTO runs.case_runs BY NAME SELECT * REPLACE "
        "('fx-other' AS fixture_id, 2 AS attempt) FROM runs.case_runs"
    )
    before = table(con)
    with pytest.raises(
        RelabelError, match=rf"run run-x case {MONEY.case_id} names several fixture sets"
    ):
        relabel_envelopes(con, lambda _: cases_for(FIXTURES.fixture_id))
    assert table(con).equals(before)


def test_envelopes_without_a_case_run_are_counted_and_left_alone(tmp_path: Path) -> None:
    con = duckdb.connect(str(tmp_path / "warehouse.duckdb"))
    orphan = envelope(
        lane="product", case=MONEY, response=text(f"ANSWER: ${MONEY.expected}"), label="wrong"
    )
    insert_envelopes(con, [orphan])  # its case run never loaded
    before = table(con)
    report = relabel_envelopes(con, cases_for)
    assert (report.unmatched, report.relabelled, report.changed) == (1, 0, 0)
    assert table(con).equals(before)


def test_an_unknown_status_is_named(tmp_path: Path) -> None:
    con = duckdb.connect(str(tmp_path / "warehouse.duckdb"))
    item = envelope(lane="product", case=MONEY, response=text("ANSWER: 1"))
    store(tmp_path, con, [item])
    con.execute(f"UPDATE {TABLE} SET status = 'exploded'")
    with pytest.raises(
        RelabelError, match=rf"envelope {re.escape(item.envelope_id)} has status 'exploded'"
    ):
        relabel_envelopes(con, cases_for)


def test_a_json_answer_is_read_from_the_whole_reply_not_from_its_ending(tmp_path: Path) -> None:
    """Two JSON-case replies with the same ending (the ANSWER line) and a different
    beginning: one holds a fenced JSON block, so it has an answer and the other does not.
    Read once per ending, both would get the same label."""
    block = "```json\n" + json.dumps(JSON_EXPECTED) + "\n```\n"
    ending = "ANSWER: see the block above"
    with_block = envelope(lane="product", case=JSON_CASE, response=text(block + ending))
    without = envelope(lane="product", case=JSON_CASE, response=text("No block here.\n" + ending))
    con = duckdb.connect(str(tmp_path / "warehouse.duckdb"))
    store(tmp_path, con, [with_block, without])
    relabel_envelopes(con, cases_for)
    labels = stored(con)
    assert labels[with_block.envelope_id][:2] == (None, NOT_GRADED)
    assert labels[without.envelope_id][:2] == ("schema", "schema: no JSON answer in the reply")
    assert labels == one_by_one(con, cases_for)[0]


# -- the bulk path is classify and grade_answer, envelope by envelope ---------------------

_WORDS = st.sampled_from(
    ["ANSWER", "answer", "ABSTAIN", "Abstain", "ANſWER", "ABSTAİN", "abstaın", "ANSWERS", "ANS WER"]
)
_JUNK = st.sampled_from(
    ["", " ", "**", "*", "_", "`", ">", "- ", "#", "\t", "\x1c", "\u2028", "\r", "\xa0"]
)
_JSON_VALUES = [
    json.dumps(JSON_EXPECTED),
    json.dumps({**JSON_EXPECTED, "net_payable": "1.00"}),
    json.dumps({"artist_id": "ART-0118"}),
    json.dumps({**JSON_EXPECTED, "note": "x"}),
    '{"amount": "26.74"}',
    "[1, 2]",
]
_VALUES = st.sampled_from(
    [
        "$26.74",
        "26.74",
        "USD 26.740",
        "EUR 26.74",
        "$2,480.10",
        "N/A",
        "$0",
        "0",
        "NO",
        "YES",
        "16.25%",
        "2025-11-19",
        "19 November 2025",
        "14868, 15001",
        "NONE",
        "ABSTAIN",
        "n/a",
        "GBCQ51500003",
        "",
        "8",
        "15,000",
        "about ten",
        *_JSON_VALUES,
    ]
)


@st.composite
def answer_line(draw: st.DrawFn) -> str:
    return (
        draw(_JUNK)
        + draw(_WORDS)
        + draw(_JUNK)
        + draw(st.sampled_from([":", " :", "", ";"]))
        + draw(_JUNK)
        + draw(st.one_of(_VALUES, st.text(max_size=12)))
        + draw(_JUNK)
    )


_FENCED = st.sampled_from(_JSON_VALUES).map(lambda value: f"```json\n{value}\n```")
reply_text = st.one_of(
    st.lists(
        st.one_of(
            answer_line(),
            # a tag inside a line: after prose, or a second answer on the same line
            answer_line().map(lambda line: f"Actually, correcting: {line}"),
            st.tuples(answer_line(), answer_line()).map(" ".join),
            st.text(max_size=30),
            _JUNK,
            _FENCED,
            st.sampled_from(["The answer is 26.74.", "I abstain."]),
        ),
        max_size=6,
    ).flatmap(
        lambda lines: st.sampled_from(["\n", "\r\n", "\n\n"]).map(lambda sep: sep.join(lines))
    ),
    st.sampled_from(_JSON_VALUES),
)

_ARGUMENTS = st.one_of(
    st.sampled_from(
        [
            '{"query": "SELECT 1"}',
            '{"artist_id": "ART-0011", "period": "2025-10"}',
            '{"contract_id": "CON-0012", "clause_number": 3}',
            '{"contract_id": "CON-0012", "clause_number": "3"}',
            '{"name": "Eero Thorsdottir"}',
            '{"query": "x", "extra": 1}',
            "[1, 2]",
            '{"artist_id": "ART-00',
            "{}",
            "null",
        ]
    ),
    st.text(max_size=20),
)
_TOOL_NAMES = st.sampled_from([*(t.name for t in TOOLS), "delete_statement"])


@st.composite
def response(draw: st.DrawFn) -> ModelResponse | None:
    if draw(st.integers(0, 12)) == 0:
        return None
    tool_calls = tuple(
        ToolCall(id=f"c{i}", name=draw(_TOOL_NAMES), arguments=draw(_ARGUMENTS))
        for i in range(draw(st.sampled_from([0, 0, 1, 1, 2])))
    )
    return ModelResponse(
        text=draw(st.one_of(st.none(), reply_text)),
        tool_calls=tool_calls,
        stop_kind=draw(st.sampled_from(["end", "tool_use", "max_tokens", "other", None])),
        finish_reason=draw(
            st.one_of(
                st.none(), st.sampled_from(["stop", "length", "max_tokens"]), st.text(max_size=8)
            )
        ),
        body_problem=draw(
            st.sampled_from(
                [
                    None,
                    None,
                    None,
                    None,
                    "empty_body",
                    "malformed_json",
                    "no_choices",
                    "empty_reply",
                ]
            )
        ),
    )


@st.composite
def stored_envelope(draw: st.DrawFn) -> CallEnvelope:
    status = draw(
        st.sampled_from(["ok"] * 8 + ["infra_error", "harness_error", "budget_stopped", "retried"])
    )
    return envelope(
        lane=draw(st.sampled_from(["model", "product"])),
        model=draw(st.sampled_from(["m", "n"])),
        case=draw(st.sampled_from([JSON_CASE, JSON_CASE, *ALL_CASES])),
        response=draw(response()) if status == "ok" or draw(st.booleans()) else None,
        status=status,
        failure_cause=draw(
            st.sampled_from(
                [None, "connect", "timeout", "429", "5xx", "interrupted", "harness_4xx", "budget"]
            )
        ),
        label=draw(
            st.sampled_from([None, "drop", "empty", "truncated", "schema", "wrong", "right"])
        ),
        label_reason=draw(st.sampled_from([None, NOT_GRADED, "graded wrong", "old reason"])),
        answer=draw(st.sampled_from([None, "26.74", "$26.74"])),
        final=draw(st.sampled_from([True, True, True, False])),
    )


@settings(
    max_examples=30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(st.lists(stored_envelope(), min_size=1, max_size=40))
def test_the_bulk_path_labels_and_grades_exactly_as_one_by_one(
    envelopes: list[CallEnvelope],
) -> None:
    con = duckdb.connect()
    insert_envelopes(con, envelopes)
    con.execute("CREATE TABLE runs.case_runs (run_id VARCHAR, case_id VARCHAR, fixture_id VARCHAR)")
    con.executemany(
        "INSERT INTO runs.case_runs VALUES (?, ?, ?)",
        [
            [run_id, case_id, FIXTURES.fixture_id]
            for run_id, case_id in sorted({(e.run_id, e.case_id) for e in envelopes})
        ],
    )
    report = relabel_envelopes(con, cases_for)
    assert report.relabelled == sum(e.final for e in envelopes)
    labels, grades = one_by_one(con, cases_for)
    assert stored(con) == labels
    assert grade_counts(report) == grades
    assert relabel_envelopes(con, cases_for).changed == 0


# -- the pieces the bulk path relies on ---------------------------------------------------


@settings(max_examples=300, deadline=None)
@given(st.lists(reply_text, min_size=1, max_size=20), st.sampled_from(FIXTURES.cases))
def test_the_ending_of_a_reply_reads_and_grades_as_the_whole_reply(
    texts: list[str], case: Case
) -> None:
    endings = pl.Series(texts, dtype=pl.String).str.extract(ANSWER_SUFFIX_REGEX, 0).to_list()
    for whole, ending in zip(texts, endings, strict=True):
        assert answer_text(whole) == (None if ending is None else answer_text(ending)), whole
        if ending is not None:
            assert grade_answer(case, whole) == grade_answer(case, ending), whole


def test_the_tag_letters_are_every_letter_python_reads_for_them() -> None:
    everything = "".join(chr(c) for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF)
    letters = {c for tag in ANSWER_TAGS for c in tag}
    assert set(TAG_LETTERS) == letters
    for letter in letters:
        found = set(re.findall(letter, everything, re.IGNORECASE))
        assert found == set(TAG_LETTERS[letter]), letter


# -- the benchmark runs ---------------------------------------------------------------------


def test_bench_regrade_runs_on_a_few_envelopes(tmp_path: Path) -> None:
    bench = paths.PROJECT_ROOT / "bench" / "regrade.py"
    db = tmp_path / "bench.duckdb"
    result = subprocess.run(
        [
            sys.executable,
            str(bench),
            "--n",
            "400",
            "--repeats",
            "2",
            "--db",
            str(db),
            "--relabel-only",
        ],
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert re.search(r"relabel: +[\d.]+ s median of 2 +[\d,]+ envelopes/s", out), out
    assert re.search(r"floor: +[\d.]+ s median of 2 +[\d,]+ envelopes/s", out), out
    changed = [int(m.replace(",", "")) for m in re.findall(r"\(([\d,]+) changed\)", out)]
    assert len(changed) == 2 and changed[0] == changed[1] > 0, out  # each repeat redoes the work
    assert re.search(r"right +[\d,]+ +wrong +[\d,]+ +no answer +[\d,]+", out), out
    assert re.fullmatch(r"summary: relabel/floor [\d.]+x; goals met", out.splitlines()[-1]), out
    with duckdb.connect(str(db), read_only=True) as con:
        row = con.execute(f"SELECT count(*) FROM {TABLE}").fetchone()
    assert row == (400,)


def test_a_stored_response_that_is_not_json_is_named(tmp_path: Path) -> None:
    con = duckdb.connect(str(tmp_path / "warehouse.duckdb"))
    good = envelope(lane="product", case=MONEY, response=text("ANSWER: 1"))
    bad = envelope(lane="product", case=MONEY, response=text("ANSWER: 2"))
    store(tmp_path, con, [good, bad])
    con.execute(
        f'UPDATE {TABLE} SET response_json = \'{{"text": "ANSW\' WHERE envelope_id = ?',
        [bad.envelope_id],
    )
    before = table(con)
    with pytest.raises(
        RelabelError, match=rf"envelope {re.escape(bad.envelope_id)}: response_json is not valid"
    ):
        relabel_envelopes(con, cases_for)
    assert table(con).equals(before)
