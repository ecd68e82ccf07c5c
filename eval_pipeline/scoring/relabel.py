"""Re-labelling stored call envelopes with the current classifier and readers, in bulk.

The label of a lane call (`label`, `label_reason`, `answer`, `drop_cause` of
`runs.call_envelopes`) is decided when the call lands, by whatever readers existed then.
The lanes do not grade at call time (the answer is scored later, from what was stored), so
what a lane envelope stores is
``classify(status, response, tools, failure_cause=..., grader=None,
read_answer=reader_for(case))``: drop, empty, truncated or schema, or no label ("well-formed,
not graded") with the answer read. :func:`relabel_envelopes` recomputes exactly that for
every *final* envelope of the model and product lanes, from what was stored (status,
failure cause, the response JSON, the tools offered), with zero model calls, and writes the
envelopes whose stored values changed back in one transaction.

It also re-grades, without storing anything: every re-labelled envelope that carries an
answer is read against its case with the scorer's own `readers.grade_answer` (tier 1), and
the report counts right / wrong / no answer per lane and model. Case scores are the
scoring stage's job (`scoring.grading`); these counts say what the current readers make of
the stored replies, call by call.

Which envelopes:

- other lanes (the judge's calls, calibration's planted calls) are not a case's reply and
  are read with other readers elsewhere: they are left as they are and counted
  (`skipped`);
- a lane envelope's case is found through `runs.case_runs` ((run_id, case_id) ->
  fixture_id) and `cases_for(fixture_id)`; an envelope whose run left no case run is left
  as it is and counted (`unmatched`); a case id its fixture set does not hold is an error,
  and so is a (run, case) that case runs give several fixture sets.

The tools a call offered are read from one stored request per fixture set: a lane run
offers every call the tools frozen with its fixture set (`lanes/partition_runs.py`), so every lane
request of a fixture set offers the same ones. (Reading each request instead would read
all of `request_json`, the bulk of the table, for nothing.)

Speed: the columns are read with DuckDB (the response JSON parsed by DuckDB; no pydantic
per row), the structural labels are polars expressions, and what needs Python runs once
per distinct input, each a pure function of its key, so deciding it once per key is
deciding it per envelope:

- a tool call's problem, per (fixture set, name, raw arguments);
- a reply's answer: for a case read from its final ANSWER/ABSTAIN line, per distinct
  *ending* of the reply (from the first line that could hold an answer tag,
  `readers.ANSWER_SUFFIX_REGEX`: the reasoning before it cannot change which line is final
  or what it says); for a JSON-answer case, per full text, because its reader also looks
  at the last fenced block and at the whole reply, anywhere in it;
- a grade (`grade_answer(case, text).correct`), per (case, answer read), on one reply (or
  ending) of each: the verdict depends on the reply only through that answer. For a JSON
  case it is the structure compared with the expected one; for a line-read case it is
  the final line's placement and value (`readers.final_answer`), which the stored answer
  spells one-to-one for an answer (`ABSTAIN...` only for an abstention, whose verdict is
  the case's kind alone). The property test holds the counts to `grade_answer` per
  envelope.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import duckdb
import polars as pl

from eval_pipeline.cases.case import Case
from eval_pipeline.cases.readers import (
    ANSWER_SUFFIX_REGEX,
    AnswerTextReader,
    grade_answer,
    read_answer_line,
    reader_for,
    reads_json,
)
from eval_pipeline.errors import WarehouseError
from eval_pipeline.lane_records import CASE_RUNS
from eval_pipeline.providers.labels import DROP_CAUSES, call_problem
from eval_pipeline.providers.types import ModelRequest, ToolSpec
from eval_pipeline.records import FrozenRecord
from eval_pipeline.warehouse import fetch_frame, has_table
from eval_pipeline.warehouse.envelopes import TABLE

RELABELLED_LANES: tuple[str, ...] = ("model", "product")
_LANES = ", ".join(f"'{lane}'" for lane in RELABELLED_LANES)
MAX_EXAMPLES = 30
EXAMPLES_PER_TRANSITION = 3
STATUSES = ("ok", "retried", "infra_error", "harness_error", "budget_stopped")
LABEL_COLUMNS = ("label", "label_reason", "answer", "drop_cause")
NOT_GRADED = "well-formed, not graded"

_RESPONSE_SHAPE = (
    '{"text": "VARCHAR", "tool_calls": [{"name": "VARCHAR", "arguments": "VARCHAR"}], '
    '"stop_kind": "VARCHAR", "finish_reason": "VARCHAR", "body_problem": "VARCHAR"}'
)


class RelabelError(WarehouseError):
    """Stored envelopes cannot be re-labelled: their case is not in their fixture set, their
    case runs disagree on the fixture set, or a row is not an envelope the classifier knows."""


class Transition(FrozenRecord):
    """Re-labelled envelopes whose stored label was `old` and is now `new` (None:
    unlabelled), and how many of them changed (label, reason, answer or drop cause)."""

    old: str | None
    new: str | None
    count: int
    changed: int


class LabelChange(FrozenRecord):
    """One envelope whose stored label, reason, answer or drop cause changed, and why."""

    envelope_id: str
    call_id: str
    lane: str
    model: str
    case_id: str
    old: str | None
    new: str | None
    old_reason: str | None
    new_reason: str
    old_answer: str | None
    new_answer: str | None
    reason: str
    """What decided it: the classifier's reason, and the answer read when it changed."""


class GradeCount(FrozenRecord):
    """Tier-1 grades of one lane and model's re-labelled envelopes (not stored)."""

    lane: str
    model: str
    right: int
    wrong: int
    no_answer: int
    """Envelopes that carry no answer: drops, empties, truncations, schema failures,
    tool-call steps without an answer line."""


class RelabelReport(FrozenRecord):
    """What a re-label examined and changed."""

    relabelled: int
    """Final envelopes of the model and product lanes whose label was recomputed."""
    changed: int
    """Of those, how many were written back (label, reason, answer or drop cause changed)."""
    transitions: tuple[Transition, ...]
    """Counts per (old label -> new label) over every re-labelled envelope, most first."""
    examples: tuple[LabelChange, ...]
    """Up to `EXAMPLES_PER_TRANSITION` changes per transition, at most `max_examples`,
    from the transitions with most changes first."""
    grades: tuple[GradeCount, ...]
    """Per lane and model: the stored replies read against their cases by `grade_answer`."""
    skipped: dict[str, int]
    """Final envelopes of other lanes (judge, calibration), left as they are, per lane."""
    unmatched: int
    """Lane envelopes with no case run naming their fixture set, left as they are."""

    def counts(self) -> dict[tuple[str | None, str | None], int]:
        return {(t.old, t.new): t.count for t in self.transitions}

    def lines(self) -> list[str]:
        """The report as `evalp regrade` prints it."""
        skipped = ", ".join(f"{lane} {n}" for lane, n in self.skipped.items())
        out = [
            f"re-labelled {self.relabelled} final lane calls"
            + (f" (other lanes left as they are: {skipped})" if skipped else "")
            + (f"; {self.unmatched} without a case run left as they are" if self.unmatched else "")
        ]
        if not self.changed:
            out.append("no call label changed")
        else:
            out.append(f"{self.changed} call label(s) changed (old -> new):")
            out += [
                f"  {_shown(t.old)} -> {_shown(t.new)}: {t.changed}"
                for t in self.transitions
                if t.changed
            ]
            out += [
                f"  {e.lane}/{e.model} {e.call_id} {e.case_id}: {_shown(e.old)} -> "
                f"{_shown(e.new)} ({e.reason})"
                for e in self.examples
            ]
        out += [
            f"tier 1 per call, {g.lane}/{g.model}: right {g.right}, wrong {g.wrong}, "
            f"no answer {g.no_answer}"
            for g in self.grades
        ]
        return out


def _shown(label: str | None) -> str:
    return label or "unlabelled"


def relabel_envelopes(
    con: duckdb.DuckDBPyConnection,
    cases_for: Callable[[str], Mapping[str, Case]],
    *,
    max_examples: int = MAX_EXAMPLES,
) -> RelabelReport:
    """Recompute the label of every final envelope of the model and product lanes as the
    current code stores it at call time, write the changed ones back in one transaction,
    and report the transitions, a few examples and the tier-1 grades. Zero model calls; a
    second run changes nothing. `cases_for(fixture_id)` gives a fixture set's cases by id."""
    if not has_table(con, TABLE):  # nothing was ever called
        return RelabelReport(
            relabelled=0,
            changed=0,
            transitions=(),
            examples=(),
            grades=(),
            skipped={},
            unmatched=0,
        )
    con.execute("BEGIN TRANSACTION")
    try:
        report = _relabel(con, cases_for, max_examples)
    except BaseException as error:
        con.execute("ROLLBACK")
        if isinstance(error, duckdb.InvalidInputException):
            _name_unreadable_response(con)
        raise
    con.execute("COMMIT")
    return report


def _relabel(
    con: duckdb.DuckDBPyConnection,
    cases_for: Callable[[str], Mapping[str, Case]],
    max_examples: int,
) -> RelabelReport:
    lanes = _LANES
    finals = _count(con, f"SELECT count(*) FROM {TABLE} WHERE final AND lane IN ({lanes})")
    skipped = dict(
        con.execute(
            f"SELECT lane, count(*) FROM {TABLE} WHERE final AND lane NOT IN ({lanes}) "
            "GROUP BY lane ORDER BY lane"
        ).fetchall()
    )
    with_runs = has_table(con, CASE_RUNS)
    fixture_ids = (
        [
            row[0]
            for row in con.execute(
                f"SELECT DISTINCT fixture_id FROM {CASE_RUNS} ORDER BY 1"
            ).fetchall()
        ]
        if with_runs
        else []
    )
    cases = [(fid, case) for fid in fixture_ids for case in cases_for(fid).values()]
    frame = _read(con, lanes, with_runs, cases)
    if frame.height != finals:
        _name_ambiguous_case_runs(con)
    if not frame["status"].is_in(STATUSES).all():
        row = frame.filter(~pl.col("status").is_in(STATUSES)).row(0, named=True)
        raise RelabelError(
            f"{TABLE}: envelope {_describe(con, row['row'])[0]} has status {row['status']!r}, "
            f"not one of {', '.join(STATUSES)}"
        )
    missing = frame.filter(pl.col("matched") & pl.col("case").is_null())
    if not missing.is_empty():
        envelope_id, case_id, fixture_id = _describe(con, missing["row"][0])
        raise RelabelError(
            f"envelope {envelope_id}: case {case_id!r} is not in fixture set {fixture_id} "
            f"(the fixture set its run names in {CASE_RUNS})"
        )
    unmatched = frame.height - int(frame["matched"].sum())
    if unmatched:
        frame = frame.filter(pl.col("matched"))
    labelled = _label(con, frame.with_row_index("i"), cases)
    return _write_and_report(con, labelled, skipped, unmatched, max_examples)


def _count(con: duckdb.DuckDBPyConnection, sql: str) -> int:
    row = con.execute(sql).fetchone()
    assert row is not None
    return int(row[0])


def _describe(con: duckdb.DuckDBPyConnection, row: int) -> tuple[str, str, str | None]:
    """(envelope_id, case_id, fixture_id of its run) of a row of the envelope table."""
    fixture = (
        f"(SELECT any_value(k.fixture_id) FROM {CASE_RUNS} AS k "
        "WHERE k.run_id = e.run_id AND k.case_id = e.case_id)"
        if has_table(con, CASE_RUNS)
        else "NULL"
    )
    found = con.execute(
        f"SELECT e.envelope_id, e.case_id, {fixture} FROM {TABLE} AS e WHERE e.rowid = ?", [row]
    ).fetchone()
    assert found is not None, row
    return found[0], found[1], found[2]


def _name_unreadable_response(con: duckdb.DuckDBPyConnection) -> None:
    """Raise naming a final lane envelope whose stored response is not JSON (DuckDB's
    own error does not say which row it was reading)."""
    row = con.execute(
        f"SELECT envelope_id FROM {TABLE} WHERE final AND lane IN ({_LANES}) "
        "AND response_json IS NOT NULL AND NOT json_valid(response_json) LIMIT 1"
    ).fetchone()
    if row is not None:
        raise RelabelError(f"{TABLE}: envelope {row[0]}: response_json is not valid JSON")


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
    its row, lane and model, whether a case run names its fixture set (`matched`), its case
    (`case`, an index into `cases`), that case's fixture set (`fixture`, an index of the
    distinct ones in `cases`) and whether its answer is JSON, the status, the stored label
    columns and the response's fields. (Cases are matched to the few case runs, not to the
    many envelopes.)"""
    fixtures = {fid: index for index, fid in enumerate(dict.fromkeys(fid for fid, _ in cases))}
    case_frame = pl.DataFrame(
        [
            (fid, case.case_id, index, fixtures[fid], reads_json(case))
            for index, (fid, case) in enumerate(cases)
        ],
        schema={
            "fixture_id": pl.String,
            "case_id": pl.String,
            "case": pl.UInt32,
            "fixture": pl.UInt32,
            "json_case": pl.Boolean,
        },
        orient="row",
    )
    case_runs = (
        f"SELECT DISTINCT r.run_id, r.case_id, c.case, c.fixture, c.json_case FROM {CASE_RUNS} "
        "AS r LEFT JOIN relabel_cases AS c ON c.fixture_id = r.fixture_id "
        "AND c.case_id = r.case_id"
        if with_runs
        else "SELECT NULL::VARCHAR AS run_id, NULL::VARCHAR AS case_id, NULL::UINTEGER AS case, "
        "NULL::UINTEGER AS fixture, NULL::BOOLEAN AS json_case WHERE FALSE"
    )
    con.register("relabel_cases", case_frame.to_arrow())
    try:
        return fetch_frame(
            con,
            f"""
            WITH k AS ({case_runs})
            SELECT e.rowid AS row, e.lane, e.model, e.status, e.failure_cause,
                   e.label, e.label_reason, e.answer, e.drop_cause,
                   e.response_json IS NOT NULL AS has_response,
                   unnest(from_json(e.response_json, '{_RESPONSE_SHAPE}')),
                   k.run_id IS NOT NULL AS matched, k.case, k.fixture, k.json_case
            FROM {TABLE} AS e
            LEFT JOIN k ON k.run_id = e.run_id AND k.case_id = e.case_id
            WHERE e.final AND e.lane IN ({lanes})
            """,
        )
    finally:
        con.unregister("relabel_cases")


def _offered_tools(
    con: duckdb.DuckDBPyConnection, representatives: pl.DataFrame
) -> dict[int, tuple[ToolSpec, ...]]:
    """The tools each fixture set's lane requests offered, read as `ModelRequest` reads
    them from one stored request (module docstring); `representatives` holds
    (fixture, row)."""
    tools: dict[int, tuple[ToolSpec, ...]] = {}
    for fixture, row in representatives.iter_rows():
        found = con.execute(f"SELECT request_json FROM {TABLE} WHERE rowid = ?", [row]).fetchone()
        assert found is not None, row
        tools[fixture] = ModelRequest.model_validate_json(found[0]).tools
    return tools


def _once(
    frame: pl.DataFrame,
    keys: Sequence[str],
    schema: Mapping[str, pl.DataType],
    decide: Callable[..., tuple[Any, ...]],
    also: Sequence[str] = (),
) -> pl.DataFrame:
    """`decide(*key, *also)` once per distinct key of `frame`'s rows (a tuple, one value per
    column of `schema`), as columns of `frame`'s rows in their order; `also` are columns
    passed from one row of each key (whichever: the caller knows the result is the same)."""
    distinct = frame.group_by(keys).agg(pl.col(c).first() for c in also)
    values = pl.DataFrame(
        [decide(*row) for row in distinct.iter_rows()], schema=dict(schema), orient="row"
    )
    joined = frame.select(keys).join(
        pl.concat([distinct.select(keys), values], how="horizontal"),
        on=list(keys),
        how="left",
        nulls_equal=True,
        maintain_order="left",
    )
    return joined.select(list(schema))


def _rows(frame: pl.DataFrame, where: pl.Expr, *columns: str | pl.Expr) -> pl.DataFrame:
    """Some columns of the rows `where` holds (projected before filtering)."""
    return frame.lazy().filter(where).select(*columns).collect()


def _scatter(height: int, rows: pl.Series, values: pl.DataFrame) -> list[pl.Series]:
    """Columns of `height` nulls holding `values` at `rows`."""
    columns = []
    for value in values.iter_columns():
        column = pl.Series(value.name, dtype=value.dtype).extend_constant(None, height)
        if len(rows):
            column.scatter(rows, value)
        columns.append(column)
    return columns


def _tool_problems(con: duckdb.DuckDBPyConnection, frame: pl.DataFrame) -> pl.Series:
    """The first malformed call's problem of each well-formed reply that calls tools,
    decided once per distinct (fixture set, name, arguments); most calls are well formed,
    so only the malformed ones are matched back to their replies."""
    calling = _rows(
        frame, pl.col("formed") & pl.col("has_calls"), "i", "row", "fixture", "tool_calls"
    )
    none = pl.Series("tool_problem", dtype=pl.String).extend_constant(None, frame.height)
    if calling.is_empty():
        return none
    tools = _offered_tools(con, calling.group_by("fixture").agg(pl.col("row").first()))
    calls = (
        calling.select("i", "fixture", "tool_calls")
        .explode("tool_calls")
        .unnest("tool_calls")
        .with_row_index("order")  # a reply's calls in the order it made them
    )
    keys = ["fixture", "name", "arguments"]
    distinct = calls.select(keys).unique()
    problems = distinct.with_columns(
        pl.Series(
            "problem",
            [
                call_problem(name, args, tools[fixture])
                for fixture, name, args in distinct.iter_rows()
            ],
            dtype=pl.String,
        )
    ).filter(pl.col("problem").is_not_null())
    if problems.is_empty():
        return none
    first = (
        calls.join(problems, on=keys, how="inner")
        .sort("order")
        .group_by("i", maintain_order=True)
        .agg(pl.col("problem").first().alias("tool_problem"))
    )
    return _scatter(frame.height, first["i"], first.select("tool_problem"))[0]


def _label(
    con: duckdb.DuckDBPyConnection, frame: pl.DataFrame, cases: list[tuple[str, Case]]
) -> pl.DataFrame:
    """New label, label_reason, answer and drop_cause columns, as `classify` gives them
    without a grader and with the case's reader; and `correct`, the tier-1 grade of each
    envelope carrying an answer."""
    status = pl.col("status")
    ok = status == "ok"
    frame = frame.with_columns(
        (pl.col("tool_calls").list.len().fill_null(0) > 0).alias("has_calls"),
        status.is_in(["infra_error", "retried"]).alias("is_drop"),
        status.is_in(["harness_error", "budget_stopped"]).alias("unlabelled"),
        (ok & pl.col("has_response") & (pl.col("stop_kind") == "max_tokens"))
        .fill_null(False)
        .alias("truncated"),
    )
    well = ok & ~pl.col("truncated")
    frame = frame.with_columns(
        (well & (~pl.col("has_response") | pl.col("body_problem").is_not_null())).alias("empty"),
        (well & pl.col("has_response") & pl.col("body_problem").is_null()).alias("formed"),
    )
    height = frame.height
    frame = frame.with_columns(_tool_problems(con, frame))
    frame = frame.with_columns(
        (pl.col("formed") & pl.col("tool_problem").is_not_null()).alias("tool_schema"),
        (pl.col("formed") & pl.col("tool_problem").is_null()).alias("readable"),
    )

    # The answer of each readable reply: per distinct ending for a case read from its
    # final line, per full text for a JSON case (its `reader` is the case).
    texts = _rows(
        frame,
        pl.col("readable"),
        "i",
        "case",
        pl.when("json_case").then(pl.col("case")).alias("reader"),
        pl.when("json_case")
        .then(pl.col("text"))
        .otherwise(pl.col("text").str.extract(ANSWER_SUFFIX_REGEX, 0))
        .alias("key"),
    )

    readers: dict[int, AnswerTextReader] = {}

    def read(reader: int | None, key: str | None) -> tuple[str | None, str | None]:
        if reader is None:
            value = read_answer_line(key)
        else:
            if reader not in readers:
                readers[reader] = reader_for(cases[reader][1])
            value = readers[reader](key)
        return value.value, value.problem

    answers = _once(texts, ["reader", "key"], {"read": pl.String(), "problem": pl.String()}, read)
    texts = texts.with_columns(answers)
    frame = frame.with_columns(_scatter(height, texts["i"], answers))

    # Tier-1 grades of the replies with an answer, per (case, answer read): graded on one
    # reply (or ending) of each (module docstring).
    answered = texts.filter(pl.col("read").is_not_null())
    grades = _once(
        answered,
        ["case", "read"],
        {"correct": pl.Boolean()},
        lambda case, _, key: (grade_answer(cases[case][1], key).correct,),
        also=["key"],
    )
    frame = frame.with_columns(_scatter(height, answered["i"], grades))
    frame = frame.with_columns(
        (pl.col("readable") & ~pl.col("has_calls") & pl.col("read").is_null()).alias("no_answer")
    )

    reprs = {
        value: f"truncated: stop reason {value!r}"
        for value in frame.filter("truncated")["finish_reason"].unique().to_list()
        if value is not None
    }
    drop_cause = pl.when(pl.col("failure_cause").is_in(DROP_CAUSES)).then(pl.col("failure_cause"))
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
        .then(pl.lit("schema: ") + pl.col("problem"))
        .otherwise(pl.lit(NOT_GRADED))
        .alias("new_reason"),
        pl.when(pl.col("readable")).then(pl.col("read")).alias("new_answer"),
        pl.when("is_drop").then(drop_cause).alias("new_drop_cause"),
    )


def _write_and_report(
    con: duckdb.DuckDBPyConnection,
    frame: pl.DataFrame,
    skipped: Mapping[str, int],
    unmatched: int,
    max_examples: int,
) -> RelabelReport:
    frame = frame.with_columns(
        (
            pl.col("label").ne_missing(pl.col("new_label"))
            | pl.col("label_reason").ne_missing(pl.col("new_reason"))
            | pl.col("answer").ne_missing(pl.col("new_answer"))
            | pl.col("drop_cause").ne_missing(pl.col("new_drop_cause"))
        ).alias("changed")
    )
    changed = _rows(
        frame,
        pl.col("changed"),
        "row",
        *LABEL_COLUMNS,
        "new_label",
        "new_reason",
        "new_answer",
        "new_drop_cause",
    )
    if not changed.is_empty():
        updates = changed.select("row", "new_label", "new_reason", "new_answer", "new_drop_cause")
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
        .agg(pl.len().alias("count"), pl.col("changed").sum().alias("changes"))
        .sort(["count", "label", "new_label"], descending=[True, False, False], nulls_last=True)
    )
    examples = (
        changed.sort("row")
        .filter(pl.int_range(pl.len()).over("label", "new_label") < EXAMPLES_PER_TRANSITION)
        .join(transitions, on=["label", "new_label"], how="left", nulls_equal=True)
        .sort(["changes", "row"], descending=[True, False])
        .head(max_examples)
    )
    ids = {
        row[0]: row[1:]
        for row in con.execute(
            f"SELECT rowid, envelope_id, call_id, lane, model, case_id FROM {TABLE} "
            "WHERE rowid IN (SELECT unnest(?))",
            [examples["row"].to_list()],
        ).fetchall()
    }
    grades = (
        frame.group_by("lane", "model")
        .agg(
            (pl.col("correct") == True).sum().alias("right"),  # noqa: E712 (a column, not a bool)
            (pl.col("correct") == False).sum().alias("wrong"),  # noqa: E712
            pl.col("new_answer").is_null().sum().alias("no_answer"),
        )
        .sort("lane", "model")
    )
    return RelabelReport(
        relabelled=frame.height,
        changed=changed.height,
        transitions=tuple(
            Transition(old=old, new=new, count=count, changed=changes)
            for old, new, count, changes in transitions.iter_rows()
        ),
        examples=tuple(_example(row, *ids[row["row"]]) for row in examples.iter_rows(named=True)),
        grades=tuple(GradeCount(**row) for row in grades.iter_rows(named=True)),
        skipped=dict(skipped),
        unmatched=unmatched,
    )


def _example(
    row: Mapping[str, Any], envelope_id: str, call_id: str, lane: str, model: str, case_id: str
) -> LabelChange:
    reason = row["new_reason"]
    if row["new_answer"] != row["answer"]:
        reason += f"; answer read {row['new_answer']!r}, stored {row['answer']!r}"
    return LabelChange(
        envelope_id=envelope_id,
        call_id=call_id,
        lane=lane,
        model=model,
        case_id=case_id,
        old=row["label"],
        new=row["new_label"],
        old_reason=row["label_reason"],
        new_reason=row["new_reason"],
        old_answer=row["answer"],
        new_answer=row["new_answer"],
        reason=reason,
    )
