"""Lane records in the warehouse: `runs.case_runs` and `runs.trace_events`, beside
`runs.call_envelopes`.

A partition's journals (its case runs, its trace events, and the call journals of the runs
that made them) are loaded idempotently: loading again replaces rows with themselves, and
loading one partition never touches another's rows. `runs.case_outcomes` keeps the latest
attempt of each case, so a healed case replaces its infrastructure error in the view
without deleting the record of it.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

import duckdb
import polars as pl

from eval_pipeline.journal import read_records
from eval_pipeline.lane_records import (
    CASE_OUTCOMES,
    CASE_RUNS,
    LANE_IDENTITIES,
    TRACE_EVENTS,
    CaseRun,
    LaneIdentity,
    TraceEvent,
)
from eval_pipeline.lanes.partition_runs import CASES_JOURNAL, IDENTITIES_JOURNAL, TRACES_JOURNAL
from eval_pipeline.providers.envelope import JOURNAL_NAME
from eval_pipeline.warehouse import has_table, transaction, upsert_in_order
from eval_pipeline.warehouse.envelopes import load_journal

_CASE_COLUMNS = """
    run_id VARCHAR NOT NULL, lane VARCHAR NOT NULL, model VARCHAR NOT NULL,
    seed BIGINT NOT NULL, case_id VARCHAR NOT NULL, attempt INTEGER NOT NULL,
    fixture_id VARCHAR NOT NULL, settings_hash VARCHAR NOT NULL, status VARCHAR NOT NULL,
    end_reason VARCHAR NOT NULL, final_text VARCHAR, turns INTEGER NOT NULL,
    tool_calls INTEGER NOT NULL, guard_firings VARCHAR NOT NULL, call_ids VARCHAR NOT NULL,
    cost_usd DECIMAL(24,12) NOT NULL, input_tokens BIGINT NOT NULL,
    output_tokens BIGINT NOT NULL, first_call VARCHAR, elapsed_ms DOUBLE NOT NULL,
    started_at VARCHAR NOT NULL,
    PRIMARY KEY (lane, model, seed, settings_hash, case_id, attempt)
"""
_TRACE_COLUMNS = """
    event_id VARCHAR PRIMARY KEY, run_id VARCHAR NOT NULL, lane VARCHAR NOT NULL,
    model VARCHAR NOT NULL, seed BIGINT NOT NULL, case_id VARCHAR NOT NULL,
    attempt INTEGER NOT NULL, turn INTEGER NOT NULL, seq INTEGER NOT NULL,
    kind VARCHAR NOT NULL, tool VARCHAR, data VARCHAR NOT NULL
"""
_IDENTITY_COLUMNS = """
    settings_hash VARCHAR PRIMARY KEY, lane VARCHAR NOT NULL, model VARCHAR NOT NULL,
    fixture_id VARCHAR NOT NULL, settings VARCHAR NOT NULL, config VARCHAR NOT NULL
"""


def ensure_lane_tables(con: duckdb.DuckDBPyConnection) -> None:
    con.execute("CREATE SCHEMA IF NOT EXISTS runs")
    con.execute(f"CREATE TABLE IF NOT EXISTS {CASE_RUNS} ({_CASE_COLUMNS})")
    con.execute(f"CREATE TABLE IF NOT EXISTS {TRACE_EVENTS} ({_TRACE_COLUMNS})")
    con.execute(f"CREATE TABLE IF NOT EXISTS {LANE_IDENTITIES} ({_IDENTITY_COLUMNS})")
    con.execute(
        f"""
        CREATE OR REPLACE VIEW {CASE_OUTCOMES} AS
        SELECT * FROM {CASE_RUNS}
        QUALIFY row_number() OVER (
            PARTITION BY lane, model, seed, settings_hash, case_id ORDER BY attempt DESC
        ) = 1
        """
    )


def _case_row(run: CaseRun) -> dict[str, object]:
    row: dict[str, object] = json.loads(run.model_dump_json())
    row["guard_firings"] = json.dumps(run.guard_firings, sort_keys=True)
    row["call_ids"] = json.dumps(list(run.call_ids))
    row["first_call"] = None if run.first_call is None else run.first_call.model_dump_json()
    return row


def _trace_row(event: TraceEvent) -> dict[str, object]:
    row: dict[str, object] = json.loads(event.model_dump_json())
    row["data"] = json.dumps(event.data, sort_keys=True, ensure_ascii=False)
    return row


def _identity_row(identity: LaneIdentity) -> dict[str, object]:
    row: dict[str, object] = json.loads(identity.model_dump_json())
    row["settings"] = json.dumps(identity.settings, sort_keys=True)
    row["config"] = json.dumps(identity.config, sort_keys=True)
    return row


def read_identities(con: duckdb.DuckDBPyConnection) -> dict[str, LaneIdentity]:
    """What each settings hash stands for (empty before any partition was loaded)."""
    if not has_table(con, LANE_IDENTITIES):
        return {}
    rows = con.execute(
        f"SELECT settings_hash, lane, model, fixture_id, settings, config FROM {LANE_IDENTITIES}"
    ).fetchall()
    return {
        row[0]: LaneIdentity(
            settings_hash=row[0],
            lane=row[1],
            model=row[2],
            fixture_id=row[3],
            settings=json.loads(row[4]),
            config=json.loads(row[5]),
        )
        for row in rows
    }


def _upsert(con: duckdb.DuckDBPyConnection, table: str, rows: list[dict[str, object]]) -> int:
    if not rows:
        return 0
    frame = pl.DataFrame(rows, infer_schema_length=None)
    upsert_in_order(con, table, frame)
    return frame.height


def load_partition_records(
    folders: Iterable[Path], runs_root: Path, con: duckdb.DuckDBPyConnection
) -> dict[str, int]:
    """Load the case runs and traces of partition folders, and the call journals of the
    runs they name, in one transaction; returns how many rows each table received."""
    ensure_lane_tables(con)
    cases = [run for folder in folders for run in read_records(folder / CASES_JOURNAL, CaseRun)]
    events = [
        event for folder in folders for event in read_records(folder / TRACES_JOURNAL, TraceEvent)
    ]
    identities = [
        identity
        for folder in folders
        for identity in read_records(folder / IDENTITIES_JOURNAL, LaneIdentity)
    ]
    run_ids = sorted({run.run_id for run in cases})
    with transaction(con):
        _upsert(con, LANE_IDENTITIES, [_identity_row(identity) for identity in identities])
        loaded_cases = _upsert(con, CASE_RUNS, [_case_row(run) for run in cases])
        loaded_events = _upsert(con, TRACE_EVENTS, [_trace_row(event) for event in events])
    envelopes = 0
    for run_id in run_ids:
        journal = runs_root / run_id / JOURNAL_NAME
        if journal.exists():
            envelopes += load_journal(journal, con)
    return {"case_runs": loaded_cases, "trace_events": loaded_events, "call_envelopes": envelopes}


def distinct_call_counts(
    con: duckdb.DuckDBPyConnection, settings_hashes: Mapping[tuple[str, str], Sequence[str]]
) -> dict[tuple[str, str], int]:
    """Distinct model calls behind each (lane, model)'s case runs under the given lane
    settings (the envelopes a published number stands on)."""
    counts: dict[tuple[str, str], int] = {}
    for (lane, model), settings in settings_hashes.items():
        row = con.execute(
            f"SELECT count(DISTINCT call_id) FROM (SELECT unnest(from_json(call_ids, "
            f"'[\"VARCHAR\"]')) AS call_id FROM {CASE_OUTCOMES} WHERE lane = ? AND model = ? "
            "AND list_contains(?, settings_hash))",
            [lane, model, list(settings)],
        ).fetchone()
        counts[(lane, model)] = int(row[0]) if row else 0
    return counts
