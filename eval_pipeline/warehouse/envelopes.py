"""The warehouse side of call envelopes: `runs.call_envelopes` in DuckDB.

The warehouse's, not the model-call layer's: the harness journals each attempt to a file
and knows nothing of where a journal is loaded (the caller loads it, as the lanes, the
judge and the calibration do).

Journals are loaded in batches (idempotently: loading again changes nothing), so a run
that crashed can be loaded later from the journal it left; `runs.journal_loads` records
how many bytes of each journal were loaded, so `load_pending_journals` finds the journals
a killed process never loaded. A row is replaced by a later load of the same envelope id
(an attempt journaled as in flight, then landed). The view `runs.call_outcomes` keeps the
latest final attempt of each call, so a call healed by a later re-run replaces its
infrastructure error without deleting the record of it.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path

import duckdb
import polars as pl

from eval_pipeline.providers.envelope import JOURNAL_NAME, CallEnvelope, envelope_row, read_journal
from eval_pipeline.warehouse import RUNS_SCHEMA, connect, has_table, transaction, upsert_in_order

TABLE = "runs.call_envelopes"
OUTCOMES_VIEW = "runs.call_outcomes"
LOADS_TABLE = "runs.journal_loads"

COLUMNS: tuple[tuple[str, str], ...] = (
    ("envelope_id", "VARCHAR PRIMARY KEY"),
    ("run_id", "VARCHAR NOT NULL"),
    ("call_id", "VARCHAR NOT NULL"),
    ("attempt", "INTEGER NOT NULL"),
    ("final", "BOOLEAN NOT NULL"),
    ("request_hash", "VARCHAR NOT NULL"),
    ("lane", "VARCHAR NOT NULL"),
    ("case_id", "VARCHAR NOT NULL"),
    ("turn", "INTEGER NOT NULL"),
    ("seed", "BIGINT"),
    ("replicate", "INTEGER NOT NULL"),
    ("model", "VARCHAR NOT NULL"),
    ("provider", "VARCHAR NOT NULL"),
    ("api", "VARCHAR NOT NULL"),
    ("wire_model", "VARCHAR NOT NULL"),
    ("started_at", "TIMESTAMP NOT NULL"),
    ("call_day", "DATE NOT NULL"),
    ("elapsed_ms", "DOUBLE NOT NULL"),
    ("status", "VARCHAR NOT NULL"),
    ("http_status", "INTEGER"),
    ("failure_cause", "VARCHAR"),
    ("failure_detail", "VARCHAR"),
    ("retry_after_ms", "BIGINT"),
    ("backoff_ms", "DOUBLE"),
    ("finish_reason", "VARCHAR"),
    ("stop_kind", "VARCHAR"),
    ("input_tokens", "BIGINT"),
    ("output_tokens", "BIGINT"),
    ("price_model", "VARCHAR NOT NULL"),
    ("price_tier", "VARCHAR"),
    ("cost_usd", "DECIMAL(24,12)"),
    ("reserved_usd", "DECIMAL(24,12)"),
    ("label", "VARCHAR"),
    ("label_reason", "VARCHAR"),
    ("drop_cause", "VARCHAR"),
    ("answer", "VARCHAR"),
    ("cache_status", "VARCHAR NOT NULL"),
    ("request_json", "VARCHAR NOT NULL"),
    ("response_body", "VARCHAR"),
    ("response_json", "VARCHAR"),
)
COLUMN_NAMES: tuple[str, ...] = tuple(name for name, _ in COLUMNS)
_POLARS_TYPES: dict[str, type[pl.DataType]] = {
    "INTEGER": pl.Int64,
    "BIGINT": pl.Int64,
    "BOOLEAN": pl.Boolean,
    "DOUBLE": pl.Float64,
}

assert set(COLUMN_NAMES) == set(CallEnvelope.model_fields), "table and envelope disagree"


def ensure_envelope_table(con: duckdb.DuckDBPyConnection) -> None:
    """Create the `runs` schema, the envelope table and the outcomes view if missing."""
    con.execute(f"CREATE SCHEMA IF NOT EXISTS {RUNS_SCHEMA}")
    columns = ",\n  ".join(f"{name} {kind}" for name, kind in COLUMNS)
    con.execute(f"CREATE TABLE IF NOT EXISTS {TABLE} (\n  {columns}\n)")
    con.execute(
        f"CREATE TABLE IF NOT EXISTS {LOADS_TABLE} (journal VARCHAR PRIMARY KEY, "
        "bytes BIGINT NOT NULL, envelopes BIGINT NOT NULL, loaded_at TIMESTAMP NOT NULL)"
    )
    con.execute(
        f"""
        CREATE VIEW IF NOT EXISTS {OUTCOMES_VIEW} AS
        SELECT * FROM {TABLE}
        WHERE final
        QUALIFY row_number() OVER (PARTITION BY run_id, call_id ORDER BY attempt DESC) = 1
        """
    )


def _polars_type(kind: str) -> type[pl.DataType]:
    return _POLARS_TYPES.get(kind.split()[0], pl.String)


def insert_envelopes(con: duckdb.DuckDBPyConnection, envelopes: Iterable[CallEnvelope]) -> int:
    """Insert envelopes, replacing stored ones of the same id; returns how many were new."""
    ensure_envelope_table(con)
    rows = [envelope_row(envelope) for envelope in envelopes]
    if not rows:
        return 0
    schema = {name: _polars_type(kind) for name, kind in COLUMNS}
    frame = pl.DataFrame(rows, schema=schema, orient="row")
    casts = ", ".join(
        f"CAST({name} AS {kind.split(' PRIMARY')[0].split(' NOT NULL')[0]}) AS {name}"
        for name, kind in COLUMNS
    )
    before = _count(con)
    upsert_in_order(con, TABLE, frame, f"SELECT {casts} FROM incoming_rows")
    return _count(con) - before


def _count(con: duckdb.DuckDBPyConnection) -> int:
    row = con.execute(f"SELECT count(*) FROM {TABLE}").fetchone()
    return int(row[0]) if row else 0


def load_journal(
    journal: Path, database: Path | duckdb.DuckDBPyConnection, *, batch_size: int = 5_000
) -> int:
    """Load a journal file into `runs.call_envelopes` in batches; returns new rows."""
    if isinstance(database, duckdb.DuckDBPyConnection):
        return _load(journal, database, batch_size)
    with connect(database) as con:
        return _load(journal, con, batch_size)


def _load(journal: Path, con: duckdb.DuckDBPyConnection, batch_size: int) -> int:
    """One transaction: the envelopes and the record of how much of the journal they are."""
    ensure_envelope_table(con)
    size = journal.stat().st_size
    added = loaded = 0
    batch: list[CallEnvelope] = []
    with transaction(con):
        for envelope in read_journal(journal):
            batch.append(envelope)
            loaded += 1
            if len(batch) >= batch_size:
                added += insert_envelopes(con, batch)
                batch = []
        added += insert_envelopes(con, batch)
        con.execute(
            f"INSERT OR REPLACE INTO {LOADS_TABLE} VALUES (?, ?, ?, current_localtimestamp())",
            [str(journal.resolve()), size, loaded],
        )
    return added


def pending_journals(runs_root: Path, con: duckdb.DuckDBPyConnection) -> list[Path]:
    """Journals under `runs_root` (`<run>/envelopes.jsonl`) not loaded in full: never
    loaded, or grown since (a process killed before its session closed)."""
    loaded: dict[str, int] = {}
    if has_table(con, LOADS_TABLE):
        loaded = dict(con.execute(f"SELECT journal, bytes FROM {LOADS_TABLE}").fetchall())
    return [
        path
        for path in sorted(runs_root.glob(f"*/{JOURNAL_NAME}"))
        if loaded.get(str(path.resolve())) != path.stat().st_size
    ]


def load_pending_journals(runs_root: Path, database: Path) -> dict[Path, int]:
    """Load every journal a run left unloaded; returns new rows per journal loaded."""
    if not runs_root.is_dir():
        return {}
    with connect(database) as con:
        return {path: _load(path, con, 5_000) for path in pending_journals(runs_root, con)}


def read_envelopes(
    con: duckdb.DuckDBPyConnection,
    *,
    run_id: str | None = None,
    where: str = "TRUE",
    outcomes_only: bool = False,
) -> list[CallEnvelope]:
    """Envelopes back from the warehouse (all attempts, or only each call's outcome)."""
    source = OUTCOMES_VIEW if outcomes_only else TABLE
    query = f"SELECT {', '.join(COLUMN_NAMES)} FROM {source} WHERE ({where})"
    params: list[object] = []
    if run_id is not None:
        query += " AND run_id = ?"
        params.append(run_id)
    query += " ORDER BY started_at, envelope_id"
    cursor = con.execute(query, params)
    return [
        CallEnvelope.model_validate(dict(zip(COLUMN_NAMES, row, strict=True)))
        for row in cursor.fetchall()
    ]


def infra_error_calls(con: duckdb.DuckDBPyConnection, run_id: str) -> Sequence[CallEnvelope]:
    """Calls of a run whose latest outcome is still an infrastructure error (‡), to re-run."""
    return read_envelopes(con, run_id=run_id, where="status = 'infra_error'", outcomes_only=True)
