"""Re-labelling stored call envelopes with the current classifier and readers, in bulk.

The six-label of a call (`label`, `label_reason`, `answer`, `drop_cause` of
`runs.call_envelopes`) was decided when the call landed, by whatever readers existed then.
:func:`relabel_envelopes` recomputes it for every *final* envelope from what was stored
(status, failure cause, the response JSON, the tools offered), with zero model calls, and
writes the envelopes whose label changed back in one transaction.

Which grader an envelope is labelled with (:func:`envelope_grader` is the one definition;
the bulk path computes exactly what :func:`~eval_pipeline.providers.labels.classify` gives
with it, and a property test holds it to that):

- model lane: the case's expected first tool call (`expect_tool_call`: its name and the
  arguments it lists); a case without one is graded on its answer;
- product lane: a reply without tool calls is the case's answer (`expect_answer` with the
  case's kind, currency and tolerance); a reply that calls tools is a step, not an answer:
  labelled structurally (schema when a call is malformed), otherwise unlabelled
  ("well-formed, not graded");
- other lanes (the judge's calls, calibration's planted calls) are not a case's answer and
  are graded elsewhere against other expectations: they are left as they are and counted
  in the report (`skipped`);
- a lane envelope whose run left no `runs.case_runs` row (so no fixture set names its
  case) is left as it is and counted (`unmatched`); a case id its fixture set does not
  hold is an error.

The tools a call offered are read from one stored request per fixture set: a lane run
offers every call the tools frozen with its fixture set (`lanes/runner.py`), so every
lane request of a fixture set offers the same ones. (Reading each request instead would
read all of `request_json`, the bulk of the table, for nothing.)

Speed: the columns are read with DuckDB (the response JSON parsed by DuckDB; no pydantic
per row), the structural labels are polars expressions, and what needs Python runs once
per distinct input: a tool call's problem per (tools, name, arguments), a reply's answer
per distinct ending (from the first line that could hold an answer tag:
`readers.ANSWER_SUFFIX_REGEX`), a grade per (case, answer) or (case, first call). Each is
a pure function of its key, so deciding it once per key is deciding it per envelope.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Hashable, Mapping
from typing import Any, Literal

import duckdb
import polars as pl

from eval_pipeline.errors import WarehouseError
from eval_pipeline.fixtures.case import Case
from eval_pipeline.lanes.store import CASE_RUNS
from eval_pipeline.providers.labels import (
    DROP_CAUSES,
    Grader,
    answer_check,
    call_problem,
    expect_answer,
    expect_tool_call,
    first_call_check,
)
from eval_pipeline.providers.types import ModelRequest, ModelResponse, ToolSpec
from eval_pipeline.providers.warehouse import TABLE
from eval_pipeline.records import FrozenRecord
from eval_pipeline.scoring.readers import (
    ANSWER_SUFFIX_REGEX,
    answer_text,
    case_currency,
    read_value,
)
from eval_pipeline.warehouse import has_table

RELABELLED_LANES: tuple[str, ...] = ("model", "product")
MAX_EXAMPLES = 30
EXAMPLES_PER_TRANSITION = 3
STATUSES = ("ok", "retried", "infra_error", "harness_error", "budget_stopped")
LABEL_COLUMNS = ("label", "label_reason", "answer", "drop_cause")

GraderKind = Literal["answer", "tool", "none"]
_RESPONSE_SHAPE = json.dumps(
    {
        "text": "VARCHAR",
        "tool_calls": [{"name": "VARCHAR", "arguments": "VARCHAR"}],
        "stop_kind": "VARCHAR",
        "finish_reason": "VARCHAR",
        "body_problem": "VARCHAR",
    }
)


class RelabelError(WarehouseError):
    """Stored envelopes cannot be re-labelled: their case is not in their fixture set, or
    a row is not an envelope the classifier knows."""


class Transition(FrozenRecord):
    """How many re-labelled envelopes went from `old` to `new` (None: unlabelled)."""

    old: str | None
    new: str | None
    count: int


class LabelChange(FrozenRecord):
    """One envelope whose stored label, reason or answer changed, and why."""

    envelope_id: str
    call_id: str
    lane: str
    case_id: str
    old: str | None
    new: str | None
    old_reason: str | None
    new_reason: str
    old_answer: str | None
    new_answer: str | None
    reason: str
    """What decided the new label: the classifier's reason and, for a graded reply, what
    was read against what the case expects."""


class RelabelReport(FrozenRecord):
    """What a re-label examined and changed."""

    relabelled: int
    """Final envelopes of the model and product lanes whose label was recomputed."""
    changed: int
    """Of those, how many were written back (label, reason, answer or drop cause changed)."""
    transitions: tuple[Transition, ...]
    """Counts per (old label -> new label) over every re-labelled envelope, most first."""
    examples: tuple[LabelChange, ...]
    """Up to `EXAMPLES_PER_TRANSITION` changes per transition, at most `max_examples`."""
    skipped: dict[str, int]
    """Final envelopes of other lanes (judge, calibration), left as they are, per lane."""
    unmatched: int
    """Lane envelopes with no case run naming their fixture set, left as they are."""

    def counts(self) -> dict[tuple[str | None, str | None], int]:
        return {(t.old, t.new): t.count for t in self.transitions}


def grader_kind(lane: str, case: Case, has_tool_calls: bool) -> GraderKind:
    """Which grader an envelope of `lane` for `case` is labelled with (module docstring)."""
    if lane == "model" and case.expected_first_call is not None:
        return "tool"
    if lane == "product" and has_tool_calls:
        return "none"
    return "answer"


def case_answer_grader(case: Case) -> Grader:
    """`expect_answer` for the case: its expected value, kind, currency and tolerance."""
    return expect_answer(case.expected, case.answer_kind, _currency(case), case.tolerance)


def envelope_grader(lane: str, case: Case, response: ModelResponse | None) -> Grader | None:
    """The grader `classify` is given for a stored envelope of `lane` for `case`."""
    kind = grader_kind(lane, case, bool(response and response.tool_calls))
    if kind == "none":
        return None
    if kind == "tool":
        expected = case.expected_first_call
        assert expected is not None
        return expect_tool_call(expected.name, expected.arguments)
    return case_answer_grader(case)


def _currency(case: Case) -> str:
    return case_currency(case) if case.answer_kind == "money" else "USD"


def relabel_envelopes(
    con: duckdb.DuckDBPyConnection,
    cases_for: Callable[[str], Mapping[str, Case]],
    *,
    max_examples: int = MAX_EXAMPLES,
) -> RelabelReport:
    """Recompute the six-label of every final envelope of the model and product lanes with
    the current classifier and readers, write the changed ones back in one transaction, and
    report the transitions with a few examples. Zero model calls; a second run changes
    nothing. `cases_for(fixture_id)` gives a fixture set's cases by case id."""
    con.execute("BEGIN TRANSACTION")
    try:
        report = _relabel(con, cases_for, max_examples)
    except BaseException:
        con.execute("ROLLBACK")
        raise
    con.execute("COMMIT")
    return report


def _relabel(
    con: duckdb.DuckDBPyConnection,
    cases_for: Callable[[str], Mapping[str, Case]],
    max_examples: int,
) -> RelabelReport:
    lanes = ", ".join(f"'{lane}'" for lane in RELABELLED_LANES)
    finals = dict(
        con.execute(
            f"SELECT lane IN ({lanes}), count(*) FROM {TABLE} WHERE final GROUP BY ALL"
        ).fetchall()
    )
    skipped = dict(
        con.execute(
            f"SELECT lane, count(*) FROM {TABLE} WHERE final AND lane NOT IN ({lanes}) "
            "GROUP BY lane ORDER BY lane"
        ).fetchall()
    )
    with_runs = has_table(con, CASE_RUNS)
    fixture_ids = (
        [row[0] for row in con.execute(f"SELECT DISTINCT fixture_id FROM {CASE_RUNS} ORDER BY 1").fetchall()]
        if with_runs
        else []
    )
    cases = [(fixture_id, case) for fixture_id in fixture_ids for case in cases_for(fixture_id).values()]
    frame = _read(con, lanes, with_runs, cases)
    if frame.height != finals.get(True, 0):
        _name_ambiguous_case_runs(con)
    if not frame["status"].is_in(STATUSES).all():
        row = frame.filter(~pl.col("status").is_in(STATUSES)).row(0, named=True)
        raise RelabelError(
            f"{TABLE}: envelope {_envelope_id(con, row['row'])} has status {row['status']!r}, "
            f"not one of {', '.join(STATUSES)}"
        )
    unmatched = frame.height - int(frame["matched"].sum())
    missing = frame.filter(pl.col("matched") & pl.col("case").is_null())
    if not missing.is_empty():
        envelope_id, case_id, fixture_id = _describe(con, missing["row"][0])
        raise RelabelError(
            f"envelope {envelope_id}: case {case_id!r} is not in fixture set {fixture_id} "
            f"(the fixture set its run names in {CASE_RUNS})"
        )
    if unmatched:
        frame = frame.filter(pl.col("matched"))
    labelled = _label(con, frame.with_row_index("i"), cases)
    return _write_and_report(con, labelled, cases, skipped, unmatched, max_examples)


def _envelope_id(con: duckdb.DuckDBPyConnection, row: int) -> str:
    return _describe(con, row)[0]


def _describe(con: duckdb.DuckDBPyConnection, row: int) -> tuple[str, str, str | None]:
    """(envelope_id, case_id, fixture_id of its run) of a row of the envelope table."""
    found = con.execute(
        f"SELECT e.envelope_id, e.case_id, (SELECT any_value(k.fixture_id) FROM {CASE_RUNS} AS k "
        f"WHERE k.run_id = e.run_id AND k.case_id = e.case_id) FROM {TABLE} AS e WHERE e.rowid = ?"
        if has_table(con, CASE_RUNS)
        else f"SELECT e.envelope_id, e.case_id, NULL FROM {TABLE} AS e WHERE e.rowid = ?",
        [row],
    ).fetchone()
    assert found is not None, row
    return found[0], found[1], found[2]


def _name_ambiguous_case_runs(con: duckdb.DuckDBPyConnection) -> None:
    """Raise naming a (run, case) that case runs give several fixture sets (the read met
    its envelopes once per fixture set)."""
    row = con.execute(
        f"SELECT run_id, case_id, list(DISTINCT fixture_id ORDER BY fixture_id) FROM {CASE_RUNS} "
        "GROUP BY run_id, case_id HAVING count(DISTINCT fixture_id) > 1 LIMIT 1"
    ).fetchone()
    assert row is not None, "envelopes read more than once, yet no ambiguous case run"
    raise RelabelError(
        f"{CASE_RUNS}: run {row[0]} case {row[1]} names several fixture sets {row[2]}"
    )


def _read(
    con: duckdb.DuckDBPyConnection, lanes: str, with_runs: bool, cases: list[tuple[str, Case]]
) -> pl.DataFrame:
    """The columns a label depends on, for every final lane envelope (one DuckDB query):
    its row, whether a case run names its fixture set (`matched`) and its case (`case`, an
    index into `cases`), the status, the stored label and the response's fields."""
    case_runs = (
        f"SELECT DISTINCT run_id, case_id, fixture_id FROM {CASE_RUNS}"
        if with_runs
        else "SELECT NULL::VARCHAR AS run_id, NULL::VARCHAR AS case_id, "
        "NULL::VARCHAR AS fixture_id WHERE FALSE"
    )
    case_frame = pl.DataFrame(
        [
            (fixture_id, case.case_id, index, case.expected_first_call is not None)
            for index, (fixture_id, case) in enumerate(cases)
        ],
        schema={
            "fixture_id": pl.String,
            "case_id": pl.String,
            "case": pl.UInt32,
            "first_call_case": pl.Boolean,
        },
        orient="row",
    )
    con.register("relabel_cases", case_frame.to_arrow())
    try:
        return con.execute(
            f"""
            WITH k AS ({case_runs})
            SELECT e.rowid AS row, e.lane = 'product' AS product, e.status, e.failure_cause,
                   e.label, e.label_reason, e.answer, e.drop_cause,
                   e.response_json IS NOT NULL AS has_response,
                   unnest(from_json(e.response_json, '{_RESPONSE_SHAPE}')),
                   k.fixture_id IS NOT NULL AS matched, c.case, c.first_call_case
            FROM {TABLE} AS e
            LEFT JOIN k ON k.run_id = e.run_id AND k.case_id = e.case_id
            LEFT JOIN relabel_cases AS c ON c.fixture_id = k.fixture_id AND c.case_id = e.case_id
            WHERE e.final AND e.lane IN ({lanes})
            """
        ).pl()
    finally:
        con.unregister("relabel_cases")


def _offered_tools(
    con: duckdb.DuckDBPyConnection, representatives: pl.DataFrame
) -> dict[str, tuple[ToolSpec, ...]]:
    """The tools each fixture set's lane requests offered, read as `ModelRequest` reads
    them from one stored request (module docstring); `representatives` holds
    (fixture_id, row)."""
    tools: dict[str, tuple[ToolSpec, ...]] = {}
    for fixture_id, row in representatives.iter_rows():
        found = con.execute(f"SELECT request_json FROM {TABLE} WHERE rowid = ?", [row]).fetchone()
        assert found is not None, row
        tools[fixture_id] = ModelRequest.model_validate_json(found[0]).tools
    return tools


def _once(
    frame: pl.DataFrame, keys: list[str], dtype: pl.DataType, decide: Callable[..., Any]
) -> pl.Series:
    """`decide(*key)` once per distinct key of `frame`'s rows, as a column of its rows."""
    distinct = frame.select(keys).unique()
    values = pl.Series("value", [decide(*key) for key in distinct.iter_rows()], dtype=dtype)
    joined = frame.select(keys).join(
        distinct.with_columns(values), on=keys, how="left", nulls_equal=True, maintain_order="left"
    )
    return joined["value"]


def _rows(frame: pl.DataFrame, where: pl.Expr, *columns: str | pl.Expr) -> pl.DataFrame:
    """Some columns of the rows `where` holds (projected before filtering)."""
    return frame.lazy().filter(where).select(*columns).collect()


def _scatter(height: int, rows: pl.Series, values: pl.Series) -> pl.Series:
    """A column of `height` nulls holding `values` at `rows`."""
    column = pl.Series(values.name, dtype=values.dtype).extend_constant(None, height)
    if len(rows):
        column.scatter(rows, values)
    return column


def _tool_problems(
    con: duckdb.DuckDBPyConnection, calling: pl.DataFrame, height: int, fixtures: pl.Series
) -> pl.Series:
    """The first malformed call's problem of each reply that calls tools (rows `i`);
    `fixtures` gives each case's fixture set."""
    if calling.is_empty():
        return pl.Series("tool_problem", dtype=pl.String).extend_constant(None, height)
    calling = calling.with_columns(fixtures.gather(calling["case"]).alias("fixture_id"))
    tools = _offered_tools(con, calling.group_by("fixture_id").agg(pl.col("row").first()))
    calls = (
        calling.select("i", "fixture_id", "tool_calls")
        .explode("tool_calls")
        .unnest("tool_calls")
    )
    problems = calls.with_columns(
        _once(
            calls,
            ["fixture_id", "name", "arguments"],
            pl.String(),
            lambda fixture_id, name, arguments: call_problem(name, arguments, tools[fixture_id]),
        ).alias("problem")
    )
    first = problems.group_by("i", maintain_order=True).agg(
        pl.col("problem").drop_nulls().first()
    )
    return _scatter(height, first["i"], first["problem"].alias("tool_problem"))


def _label(
    con: duckdb.DuckDBPyConnection, frame: pl.DataFrame, cases: list[tuple[str, Case]]
) -> pl.DataFrame:
    """New label, label_reason, answer and drop_cause columns, as `classify` gives them."""
    status = pl.col("status")
    frame = frame.with_columns(
        (pl.col("tool_calls").list.len().fill_null(0) > 0).alias("has_calls"),
        (status.is_in(["infra_error", "retried"])).alias("is_drop"),
        (status.is_in(["harness_error", "budget_stopped"])).alias("unlabelled"),
        (
            (status == "ok") & pl.col("has_response") & (pl.col("stop_kind") == "max_tokens")
        ).fill_null(False).alias("truncated"),
    )
    frame = frame.with_columns(
        (
            (status == "ok")
            & ~pl.col("truncated")
            & (~pl.col("has_response") | pl.col("body_problem").is_not_null())
        ).alias("empty"),
        (
            (status == "ok")
            & pl.col("has_response")
            & ~pl.col("truncated")
            & pl.col("body_problem").is_null()
        ).alias("formed"),
    )
    height = frame.height
    calling = _rows(frame, pl.col("formed") & pl.col("has_calls"), "i", "row", "case", "tool_calls")
    fixtures = pl.Series([fixture_id for fixture_id, _ in cases], dtype=pl.String)
    frame = frame.with_columns(_tool_problems(con, calling, height, fixtures))
    frame = frame.with_columns(
        (pl.col("formed") & pl.col("tool_problem").is_not_null()).alias("tool_schema"),
        (pl.col("formed") & pl.col("tool_problem").is_null()).alias("readable"),
    )

    # The answer of each readable reply, read once per distinct ending.
    texts = _rows(
        frame,
        pl.col("readable") & pl.col("text").is_not_null(),
        "i",
        pl.col("text").str.extract(ANSWER_SUFFIX_REGEX, 0).alias("ending"),
    ).filter(pl.col("ending").is_not_null())
    read = _once(texts, ["ending"], pl.String(), answer_text).alias("read")
    frame = frame.with_columns(_scatter(height, texts["i"], read))
    frame = frame.with_columns(
        (pl.col("readable") & ~pl.col("has_calls") & pl.col("read").is_null()).alias("no_answer"),
        pl.when("product")
        .then(pl.when(pl.col("has_calls")).then(pl.lit("none")).otherwise(pl.lit("answer")))
        .when(pl.col("first_call_case"))
        .then(pl.lit("tool"))
        .otherwise(pl.lit("answer"))
        .alias("grader"),
    )

    # Right or wrong, once per (case, answer) or (case, first call).
    graded = pl.col("readable") & ~pl.col("no_answer")
    by_answer = _rows(frame, graded & (pl.col("grader") == "answer"), "i", "case", "read")
    by_call = _rows(
        frame,
        graded & (pl.col("grader") == "tool"),
        "i",
        "case",
        pl.col("tool_calls").list.first().alias("first"),
    ).unnest("first")
    answer_checks = _Memo(lambda index: _answer_check(cases[index][1]))
    call_checks = _Memo(lambda index: _first_call_check(cases[index][1]))
    right_by_answer = _once(
        by_answer, ["case", "read"], pl.Boolean(), lambda c, a: answer_checks(c)(a)
    )
    right_by_call = _once(
        by_call,
        ["case", "name", "arguments"],
        pl.Boolean(),
        lambda c, name, arguments: name is not None and call_checks(c)(name, arguments),
    )
    right = _scatter(
        height,
        pl.concat([by_answer["i"], by_call["i"]]),
        pl.concat([right_by_answer, right_by_call]).alias("right"),
    )
    frame = frame.with_columns(right)

    reprs = {
        value: f"truncated: stop reason {value!r}"
        for value in frame.filter("truncated")["finish_reason"].unique().to_list()
        if value is not None
    }
    drop_cause = pl.when(pl.col("failure_cause").is_in(DROP_CAUSES)).then(pl.col("failure_cause"))
    right_col = pl.col("right")
    return frame.with_columns(
        pl.when("unlabelled")
        .then(None)
        .when("is_drop")
        .then(pl.lit("drop"))
        .when("truncated")
        .then(pl.lit("truncated"))
        .when("empty")
        .then(pl.lit("empty"))
        .when(pl.col("tool_schema") | pl.col("no_answer"))
        .then(pl.lit("schema"))
        .when(right_col.is_null())
        .then(None)
        .when(right_col)
        .then(pl.lit("right"))
        .otherwise(pl.lit("wrong"))
        .alias("new_label"),
        pl.when("unlabelled")
        .then(status)
        .when("is_drop")
        .then(pl.lit("drop: ") + drop_cause.fill_null("None"))
        .when("truncated")
        .then(
            pl.col("finish_reason").replace_strict(
                reprs, default="truncated: stop reason None", return_dtype=pl.String
            )
        )
        .when("empty")
        .then(pl.lit("empty: ") + pl.col("body_problem").fill_null("no response"))
        .when("tool_schema")
        .then(pl.lit("schema: ") + pl.col("tool_problem"))
        .when("no_answer")
        .then(pl.lit("schema: no answer line in the text"))
        .when(right_col.is_null())
        .then(pl.lit("well-formed, not graded"))
        .when(right_col)
        .then(pl.lit("graded right"))
        .otherwise(pl.lit("graded wrong"))
        .alias("new_reason"),
        pl.when(pl.col("readable") & ~pl.col("no_answer")).then(pl.col("read")).alias("new_answer"),
        pl.when("is_drop").then(drop_cause).alias("new_drop_cause"),
    )


def _answer_check(case: Case) -> Callable[[str | None], bool]:
    return answer_check(case.expected, case.answer_kind, _currency(case), case.tolerance)


def _first_call_check(case: Case) -> Callable[[str, str], bool]:
    expected = case.expected_first_call
    assert expected is not None
    return first_call_check(expected.name, expected.arguments)


class _Memo:
    """A function's value per argument, built on first use."""

    def __init__(self, build: Callable[[Any], Any]) -> None:
        self._build = build
        self._values: dict[Hashable, Any] = {}

    def __call__(self, key: Hashable) -> Any:
        if key not in self._values:
            self._values[key] = self._build(key)
        return self._values[key]


def _write_and_report(
    con: duckdb.DuckDBPyConnection,
    frame: pl.DataFrame,
    cases: list[tuple[str, Case]],
    skipped: Mapping[str, int],
    unmatched: int,
    max_examples: int,
) -> RelabelReport:
    changed = _rows(
        frame,
        pl.col("label").ne_missing(pl.col("new_label"))
        | pl.col("label_reason").ne_missing(pl.col("new_reason"))
        | pl.col("answer").ne_missing(pl.col("new_answer"))
        | pl.col("drop_cause").ne_missing(pl.col("new_drop_cause")),
        "row",
        "case",
        "grader",
        "tool_calls",
        *LABEL_COLUMNS,
        "new_label",
        "new_reason",
        "new_answer",
        "new_drop_cause",
    )
    if not changed.is_empty():
        updates = changed.select(
            "row", *(pl.col(f"new_{c}") for c in ("label", "reason", "answer", "drop_cause"))
        )
        con.register("relabelled_envelopes", updates.to_arrow())
        try:
            con.execute(
                f"""
                UPDATE {TABLE} AS t SET label = u.new_label, label_reason = u.new_reason,
                       answer = u.new_answer, drop_cause = u.new_drop_cause
                FROM relabelled_envelopes AS u WHERE t.rowid = u.row
                """
            )
        finally:
            con.unregister("relabelled_envelopes")
    transitions = (
        frame.group_by("label", "new_label")
        .len()
        .sort(["len", "label", "new_label"], descending=[True, False, False], nulls_last=True)
    )
    examples = (
        changed.sort("row")
        .filter(pl.int_range(pl.len()).over("label", "new_label") < EXAMPLES_PER_TRANSITION)
        .join(transitions, on=["label", "new_label"], how="left", nulls_equal=True)
        .sort(["len", "row"], descending=[True, False])
        .head(max_examples)
    )
    ids = {
        row[0]: row[1:]
        for row in con.execute(
            f"SELECT rowid, envelope_id, call_id, lane, case_id FROM {TABLE} "
            "WHERE rowid IN (SELECT unnest(?))",
            [examples["row"].to_list()],
        ).fetchall()
    }
    return RelabelReport(
        relabelled=frame.height,
        changed=changed.height,
        transitions=tuple(
            Transition(old=old, new=new, count=count) for old, new, count in transitions.iter_rows()
        ),
        examples=tuple(
            _example(row, *ids[row["row"]], cases[row["case"]][1])
            for row in examples.iter_rows(named=True)
        ),
        skipped=dict(skipped),
        unmatched=unmatched,
    )


def _example(
    row: Mapping[str, Any], envelope_id: str, call_id: str, lane: str, case_id: str, case: Case
) -> LabelChange:
    reason = row["new_reason"]
    if row["new_label"] in ("right", "wrong"):
        if row["grader"] == "tool":
            expected = case.expected_first_call
            assert expected is not None
            first = (row["tool_calls"] or [None])[0]
            called = f"{first['name']}({first['arguments'][:80]})" if first else "no tool call"
            reason += (
                f": first call {called}, expected {expected.name} with "
                f"{json.dumps(expected.arguments, sort_keys=True)}"
            )
        else:
            reason += (
                f": answer {row['new_answer']!r} read as {case.answer_kind} "
                f"{_read_for(case, row['new_answer'])}, expected {case.expected}"
            )
    return LabelChange(
        envelope_id=envelope_id,
        call_id=call_id,
        lane=lane,
        case_id=case_id,
        old=row["label"],
        new=row["new_label"],
        old_reason=row["label_reason"],
        new_reason=row["new_reason"],
        old_answer=row["answer"],
        new_answer=row["new_answer"],
        reason=reason,
    )


def _read_for(case: Case, answer: str | None) -> str:
    if answer is None:
        return "nothing"
    if answer.startswith("ABSTAIN"):
        return "an abstention"
    read = read_value(case.answer_kind, answer, currency=_currency(case))
    return read.value if read.value is not None else f"nothing ({read.problem})"
