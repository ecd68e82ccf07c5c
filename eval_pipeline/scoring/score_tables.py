"""Scores in the warehouse: scoring a partition from its stored records, `runs.case_scores`.

A partition's scores are computed from what the lane stored (`runs.case_outcomes`, its
trace events, the labels of its calls) and written in one transaction that replaces only
that partition's rows. Re-grading runs the same code over the same rows: no model is
called, and the judge's stored verdicts are reused.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Mapping, Sequence
from decimal import Decimal

import duckdb
import polars as pl

from eval_pipeline.cases.case import Case
from eval_pipeline.lane_records import CASE_OUTCOMES, TRACE_EVENTS, CaseRun, FirstCall, TraceEvent
from eval_pipeline.scoring.score import CaseScore, JudgeVerdict, score_case
from eval_pipeline.warehouse import fetch_frame, has_table, transaction
from eval_pipeline.warehouse.envelopes import OUTCOMES_VIEW

CASE_SCORES = "runs.case_scores"
_COLUMNS = """
    lane VARCHAR NOT NULL, model VARCHAR NOT NULL, seed BIGINT NOT NULL, case_id VARCHAR NOT NULL,
    category VARCHAR NOT NULL, core BOOLEAN NOT NULL, attempt INTEGER NOT NULL,
    run_id VARCHAR NOT NULL, fixture_id VARCHAR NOT NULL, settings_hash VARCHAR NOT NULL,
    status VARCHAR NOT NULL, exact DOUBLE, trace DOUBLE, judged DOUBLE, score DOUBLE,
    failed_checks VARCHAR NOT NULL, security_violation BOOLEAN NOT NULL, answer VARCHAR,
    reason VARCHAR NOT NULL, label VARCHAR, cost_usd DECIMAL(24,12) NOT NULL,
    tokens BIGINT NOT NULL, scorer_version VARCHAR NOT NULL,
    PRIMARY KEY (lane, model, seed, case_id)
"""


class PartitionInputs:
    """What a partition's scoring reads from the warehouse."""

    def __init__(
        self,
        runs: list[CaseRun],
        events: Mapping[tuple[str, str, int], list[TraceEvent]],
        final_labels: Mapping[str, str | None],
    ) -> None:
        self.runs = runs
        self.events = events
        self.final_labels = final_labels


def ensure_score_table(con: duckdb.DuckDBPyConnection) -> None:
    con.execute("CREATE SCHEMA IF NOT EXISTS runs")
    con.execute(f"CREATE TABLE IF NOT EXISTS {CASE_SCORES} ({_COLUMNS})")


def _case_run(row: Mapping[str, object]) -> CaseRun:
    data = dict(row)
    data["guard_firings"] = json.loads(str(data["guard_firings"]))
    data["call_ids"] = tuple(json.loads(str(data["call_ids"])))
    first = data.get("first_call")
    data["first_call"] = None if first is None else FirstCall.model_validate_json(str(first))
    return CaseRun.model_validate(data)


def read_partition(
    con: duckdb.DuckDBPyConnection, lane: str, model: str, seed: int
) -> PartitionInputs:
    """The latest attempt of every case of the partition's most recent identity (lane
    settings, model config, fixture set), its trace, and the label of its final call."""
    if not has_table(con, CASE_OUTCOMES):
        return PartitionInputs([], {}, {})
    latest = con.execute(
        f"SELECT settings_hash FROM {CASE_OUTCOMES} WHERE lane = ? AND model = ? AND seed = ? "
        "ORDER BY started_at DESC LIMIT 1",
        [lane, model, seed],
    ).fetchone()
    if latest is None:
        return PartitionInputs([], {}, {})
    frame = fetch_frame(
        con,
        f"SELECT * FROM {CASE_OUTCOMES} "
        "WHERE lane = ? AND model = ? AND seed = ? AND settings_hash = ?",
        [lane, model, seed, latest[0]],
    )
    runs = [_case_run(row) for row in frame.iter_rows(named=True)]
    keys = pl.DataFrame(
        {
            "run_id": [r.run_id for r in runs],
            "case_id": [r.case_id for r in runs],
            "attempt": [r.attempt for r in runs],
        },
        schema={"run_id": pl.String, "case_id": pl.String, "attempt": pl.Int32},
    )
    con.register("score_keys", keys.to_arrow())
    try:
        events_frame = fetch_frame(
            con,
            f"SELECT t.* FROM {TRACE_EVENTS} t JOIN score_keys k USING (run_id, case_id, attempt) "
            "ORDER BY t.case_id, t.seq",
        )
    finally:
        con.unregister("score_keys")
    events: dict[tuple[str, str, int], list[TraceEvent]] = defaultdict(list)
    for row in events_frame.iter_rows(named=True):
        row["data"] = json.loads(row["data"])
        event = TraceEvent.model_validate(row)
        events[(event.run_id, event.case_id, event.attempt)].append(event)
    last_calls = [r.call_ids[-1] for r in runs if r.call_ids]
    labels = dict(
        con.execute(
            f"SELECT call_id, label FROM {OUTCOMES_VIEW} WHERE call_id IN (SELECT unnest(?))",
            [last_calls],
        ).fetchall()
    )
    final_labels = {r.case_id: labels.get(r.call_ids[-1]) if r.call_ids else None for r in runs}
    return PartitionInputs(runs, events, final_labels)


def score_partition(
    inputs: PartitionInputs,
    cases: Mapping[str, Case],
    verdicts: Mapping[str, JudgeVerdict] | None = None,
) -> list[CaseScore]:
    """Every case of the partition scored; `verdicts` are judge verdicts by case id."""
    return [
        score_case(
            cases[run.case_id],
            run,
            inputs.events.get((run.run_id, run.case_id, run.attempt), []),
            (verdicts or {}).get(run.case_id),
            inputs.final_labels.get(run.case_id),
        )
        for run in inputs.runs
        if run.case_id in cases
    ]


def _row(score: CaseScore) -> dict[str, object]:
    row: dict[str, object] = json.loads(score.model_dump_json())
    row["failed_checks"] = json.dumps(list(score.failed_checks))
    return row


def write_scores(
    con: duckdb.DuckDBPyConnection, lane: str, model: str, seed: int, scores: Sequence[CaseScore]
) -> int:
    """Replace one partition's scores, in one transaction (other partitions untouched)."""
    ensure_score_table(con)
    with transaction(con):
        con.execute(
            f"DELETE FROM {CASE_SCORES} WHERE lane = ? AND model = ? AND seed = ?",
            [lane, model, seed],
        )
        if scores:
            frame = pl.DataFrame([_row(s) for s in scores], infer_schema_length=None)
            con.register("staged_scores", frame.to_arrow())
            try:
                columns = ", ".join(frame.columns)
                con.execute(
                    f"INSERT INTO {CASE_SCORES} ({columns}) SELECT {columns} FROM staged_scores"
                )
            finally:
                con.unregister("staged_scores")
    return len(scores)


def read_scores(con: duckdb.DuckDBPyConnection, lane: str | None = None) -> list[CaseScore]:
    """Stored scores (none before any partition was scored); works read-only."""
    if not has_table(con, CASE_SCORES):
        return []
    query = (
        f"SELECT * FROM {CASE_SCORES}"
        + (" WHERE lane = ?" if lane else "")
        + " ORDER BY lane, model, seed, case_id"
    )
    frame = fetch_frame(con, query, [lane] if lane else [])
    scores = []
    for row in frame.iter_rows(named=True):
        row["failed_checks"] = tuple(json.loads(row["failed_checks"]))
        row["cost_usd"] = Decimal(str(row["cost_usd"]))
        scores.append(CaseScore.model_validate(row))
    return scores
