"""The DuckDB warehouse on disk: schemas, whole-table writes and reads.

Schemas are kept apart on purpose: `world` is what agents may query later, `truth` holds
the answer key they must never see, `meta` records what was loaded, and `runs` the call
envelopes. Table names are validated identifiers, never user text pasted into SQL.
"""

from __future__ import annotations

import errno
import re
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path

import duckdb
import polars as pl

from eval_pipeline import paths
from eval_pipeline.errors import (
    EvalPipelineError,
    LockedError,
    StateError,
    WarehouseError,
    state_os_error,
)

WORLD_SCHEMA = "world"
TRUTH_SCHEMA = "truth"
META_SCHEMA = "meta"
RUNS_SCHEMA = "runs"
WORLD_INFO_TABLE = "world_info"

_IDENTIFIER = re.compile(r"^[a-z_][a-z0-9_]*$")


def _identifier(name: str) -> str:
    if not _IDENTIFIER.match(name):
        raise WarehouseError(f"not a valid warehouse identifier: {name!r}")
    return name


def connect(path: Path, *, read_only: bool = False) -> duckdb.DuckDBPyConnection:
    """Open the warehouse file, creating its folder when writing. Every open of the
    warehouse comes here, so a file DuckDB cannot open reads as one error naming it and
    what to do (a truncated or foreign file, no space, no permission, another writer)."""
    if read_only and not path.exists():
        raise WarehouseError(f"warehouse {path} does not exist; materialize the world first")
    if not read_only:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as error:
            raise state_os_error(error, path.parent, "create") from error
    # DuckDB's allocator keeps up to 128 MB a task before handing memory back; the
    # warehouse's work is bulk loads between long stretches of polars work, which would
    # otherwise start from what the last load kept (~100 MB at 10x scale).
    try:
        conn = duckdb.connect(
            str(path), read_only=read_only, config={"allocator_flush_threshold": "8MB"}
        )
    except (duckdb.IOException, duckdb.SerializationException, duckdb.InternalException) as error:
        raise unopenable(path, error) from error
    if not read_only and not _dated(conn):
        try:
            _record_creation(conn)
        except BaseException:
            conn.close()
            raise
    return conn


WRITER_WAIT_S = 120.0
"""How long a step waits for another process's write connection to close."""


def connect_when_free(path: Path, wait_s: float = WRITER_WAIT_S) -> duckdb.DuckDBPyConnection:
    """`connect` for writing, waiting (with backoff, each wait logged) while another process
    holds the file: Dagster's warehouse pool admits one writer at a time, but two runs
    claiming the free slot at the same instant can both get it, on SQLite storage (its
    `SELECT ... FOR UPDATE SKIP LOCKED` is a plain select there) and on Postgres (the select
    runs on an autocommit connection, so its row lock is gone before the claim's update; seen
    once in CI, test_postgres_storage.py). A writer still there after `wait_s` is the
    LockedError it always was."""
    import logging

    from tenacity import (
        before_sleep_log,
        retry,
        retry_if_exception_type,
        stop_after_delay,
        wait_exponential,
    )

    waiting = retry(
        retry=retry_if_exception_type(LockedError),
        wait=wait_exponential(multiplier=0.25, max=5),
        stop=stop_after_delay(wait_s),
        before_sleep=before_sleep_log(logging.getLogger(__name__), logging.WARNING),
        reraise=True,
    )
    return waiting(connect)(path)


CREATED_TABLE = f"{META_SCHEMA}.warehouse_created"
"""When this warehouse file was created (epoch seconds): what Dagster recorded as
materialized before it is not in it (the file was deleted or moved aside since)."""


def _dated(conn: duckdb.DuckDBPyConnection) -> bool:
    """Whether the warehouse holds its creation time (asked with literals: a bound
    parameter would import pandas on every open)."""
    row = conn.execute(
        "SELECT count(*) FROM information_schema.tables "
        f"WHERE table_schema = {_text(META_SCHEMA)} AND table_name = 'warehouse_created'"
    ).fetchone()
    return bool(row and row[0])


def _record_creation(conn: duckdb.DuckDBPyConnection) -> None:
    """Date a warehouse on its first open for writing: now when it is new (holds no
    table); 0 when it already held tables before it was dated (nothing known is older)."""
    row = conn.execute("SELECT count(*) FROM information_schema.tables").fetchone()
    created = 0.0 if row and row[0] else time.time()
    with transaction(conn):
        conn.execute(f"CREATE SCHEMA IF NOT EXISTS {META_SCHEMA}")
        conn.execute(f"CREATE TABLE IF NOT EXISTS {CREATED_TABLE} (created_at DOUBLE NOT NULL)")
        # A literal, not a bound parameter: binding a Python value imports pandas (above).
        conn.execute(f"INSERT INTO {CREATED_TABLE} VALUES ({created:.6f})")


def created_at(path: Path) -> float | None:
    """When the warehouse at `path` was created (epoch seconds); None when there is none."""
    if not path.exists():
        return None
    conn = connect(path)
    try:
        value = read_value(conn, META_SCHEMA, "warehouse_created", "created_at")
    finally:
        conn.close()
    if not isinstance(value, int | float):
        raise WarehouseError(f"warehouse {path}: {CREATED_TABLE} holds {value!r}, not a time")
    return float(value)


_OS_REASONS = {
    "No space left on device": errno.ENOSPC,
    "Permission denied": errno.EACCES,
    "Read-only file system": errno.EROFS,
}


def unopenable(path: Path, error: duckdb.Error) -> EvalPipelineError:
    """What DuckDB's refusal to open `path` means for the user, as one of our errors."""
    text = str(error)
    for reason, number in _OS_REASONS.items():
        if reason in text:
            return state_os_error(OSError(number, reason), path, "open")
    if "Could not set lock" in text or "Conflicting lock" in text:
        return LockedError(
            f"warehouse {path} is open for writing in another process ({text.splitlines()[0]}); "
            "wait for it to finish"
        )
    return StateError(
        f"warehouse {path} is not a readable DuckDB database ({text.splitlines()[0]}): move "
        "it aside or delete it, and the next `evalp demo` rebuilds it (the call journals "
        f"under {paths.runs_dir()} are kept and loaded again)"
    )


# Large tables store their low-cardinality text columns as DuckDB ENUMs: loading 468k
# statement lines drops from about 1.4 s to 0.6 s, and SQL over them reads the same
# (an ENUM compares with and casts to text). Reads give the columns back as text.
ENUM_MIN_ROWS = 50_000
ENUM_MAX_VALUES = 65_535


def _enum_columns(frame: pl.DataFrame) -> dict[str, pl.Series]:
    """The text columns worth storing as ENUMs, with their sorted distinct values (a
    polars Enum's are found on its codes)."""
    if frame.height < ENUM_MIN_ROWS:
        return {}
    chosen = {}
    for column, dtype in frame.schema.items():
        series = frame[column]
        if not (dtype == pl.String or isinstance(dtype, pl.Enum)) or series.null_count():
            continue
        # Free text is refused on its first rows when they already hold too many values, and
        # never sorted: the answer key's 819,000 notes at 10x took 0.4 s to unique and sort.
        head = series.head(2 * ENUM_MAX_VALUES)
        if head.len() < series.len() and head.n_unique() > ENUM_MAX_VALUES:
            continue
        values = series.unique()
        if values.len() <= ENUM_MAX_VALUES:
            chosen[column] = values.cast(pl.String).sort()
    return chosen


def _enum_type(schema: str, table: str, column: str) -> str:
    return f"{schema}.{table}__{_identifier(column)}"


def _text(value: str) -> str:
    """A SQL string literal (single quotes doubled): only for validated identifiers and
    the staging folder's own paths, never for table contents."""
    return "'" + value.replace("'", "''") + "'"


def _replace_table(
    conn: duckdb.DuckDBPyConnection, schema: str, table: str, frame: pl.DataFrame, staging: Path
) -> None:
    """Replace ``schema.table`` with ``frame``, staged as a Parquet file DuckDB reads.

    The frame goes through a file, not a registered Python object: binding any Python
    object (a registered Arrow table, a query parameter) makes DuckDB import pandas first,
    about 0.7 s of a world's load (DuckDB 1.5). ENUM columns travel as Parquet
    dictionaries.
    """
    enums = _enum_columns(frame)
    old_types = conn.execute(
        "SELECT type_name FROM duckdb_types() "
        f"WHERE schema_name = {_text(schema)} AND starts_with(type_name, {_text(table + '__')})"
    ).fetchall()
    conn.execute(f"DROP TABLE IF EXISTS {schema}.{table}")
    for (type_name,) in old_types:
        conn.execute(f"DROP TYPE IF EXISTS {schema}.{_identifier(type_name)}")
    staged = staging / f"{schema}.{table}.parquet"
    for column, values in enums.items():
        values_file = staging / f"{schema}.{table}.{column}.parquet"
        pl.DataFrame({"value": values}).write_parquet(values_file, statistics=False)
        conn.execute(
            f"CREATE TYPE {_enum_type(schema, table, column)} AS ENUM "
            f"(SELECT value FROM read_parquet({_text(str(values_file))}) ORDER BY value)"
        )
    frame.with_columns(
        [pl.col(column).cast(pl.Enum(values)) for column, values in enums.items()]
    ).write_parquet(staged, compression="snappy", statistics=False)
    select = ", ".join(
        f'CAST("{column}" AS {_enum_type(schema, table, column)}) AS "{column}"'
        if column in enums
        else f'"{_identifier(column)}"'
        for column in frame.columns
    )
    conn.execute(
        f"CREATE TABLE {schema}.{table} AS SELECT {select} FROM read_parquet({_text(str(staged))})"
    )


@contextmanager
def transaction(conn: duckdb.DuckDBPyConnection) -> Iterator[None]:
    """The block in one transaction: all of it lands or none of it.

    A block that fails is rolled back and its own error raised. A COMMIT that fails (the
    disk filled while DuckDB wrote its log) has already rolled back: its error is raised,
    never a ROLLBACK's "no transaction is active" in its place. A write that failed for
    want of space or permission is raised as a StateError naming the file.
    """
    conn.execute("BEGIN TRANSACTION")
    try:
        yield
    except BaseException as error:
        try:
            conn.execute("ROLLBACK")
        except duckdb.Error as rollback_error:  # DuckDB gave the transaction up itself
            error.add_note(f"the rollback that followed failed too: {rollback_error}")
        failure = _write_failure(error) if isinstance(error, duckdb.Error) else error
        if failure is error:
            raise
        raise failure from error
    try:
        conn.execute("COMMIT")
    except duckdb.Error as error:
        failure = _write_failure(error)
        if failure is error:
            raise
        raise failure from error


_QUOTED_FILE = re.compile(r'file "([^"]+)"')


def _write_failure(error: duckdb.Error) -> duckdb.Error | StateError:
    """A write's DuckDB error, as a StateError naming the file when the disk refused it."""
    text = str(error)
    for reason, number in _OS_REASONS.items():
        if reason in text:
            named = _QUOTED_FILE.search(text)
            return state_os_error(
                OSError(number, reason), named.group(1) if named else "the warehouse"
            )
    return error


def write_tables(
    conn: duckdb.DuckDBPyConnection, schema: str, tables: Mapping[str, pl.DataFrame]
) -> dict[str, int]:
    """Replace `schema`'s tables with `tables` in one transaction; returns row counts."""
    schema = _identifier(schema)
    counts: dict[str, int] = {}
    with (
        tempfile.TemporaryDirectory(prefix="evalp-staging-") as folder,
        transaction(conn),
    ):
        conn.execute(f"CREATE SCHEMA IF NOT EXISTS {schema}")
        for name, frame in sorted(tables.items()):
            _replace_table(conn, schema, _identifier(name), frame, Path(folder))
            counts[name] = frame.height
    return counts


def fetch_frame(
    conn: duckdb.DuckDBPyConnection, query: str, params: Sequence[object] = ()
) -> pl.DataFrame:
    """A query's rows as a polars frame, handed over through Arrow's C stream interface.
    DuckDB's ``.pl()`` goes through a pyarrow table instead: importing pyarrow cost a
    process that needed nothing else of it 0.13 s (the fixtures check, a product lane's
    calculator), and the copy made the read slower."""
    return pl.DataFrame(conn.sql(query, params=list(params) or None))


def read_table(
    conn: duckdb.DuckDBPyConnection, schema: str, name: str, *, keep_codes: bool = False
) -> pl.DataFrame:
    """A table as a frame, its ENUM columns as text; with ``keep_codes`` as the Categorical
    codes DuckDB hands over (a caller that holds text as codes anyway skips the text: at
    10x the statement lines' text is 600 MB)."""
    qualified = f"{_identifier(schema)}.{_identifier(name)}"
    try:
        frame = fetch_frame(conn, f"SELECT * FROM {qualified}")
    except duckdb.CatalogException as error:
        raise WarehouseError(f"warehouse has no table {qualified}: {error}") from error
    if keep_codes:
        return frame
    enum_columns = [c for c, t in frame.schema.items() if isinstance(t, pl.Categorical | pl.Enum)]
    return frame.with_columns([pl.col(column).cast(pl.String) for column in enum_columns])


def read_value(conn: duckdb.DuckDBPyConnection, schema: str, name: str, column: str) -> object:
    """The one value of ``column`` in a one-row table (a recorded fingerprint): fetched as
    a Python value, without the Arrow round trip (and pyarrow import) a frame costs."""
    qualified = f"{_identifier(schema)}.{_identifier(name)}"
    try:
        rows = conn.execute(f"SELECT {_identifier(column)} FROM {qualified}").fetchall()
    except duckdb.CatalogException as error:
        raise WarehouseError(f"warehouse has no table {qualified}: {error}") from error
    if len(rows) != 1:
        raise WarehouseError(f"warehouse table {qualified} holds {len(rows)} rows, not one")
    return rows[0][0]


def has_table(conn: duckdb.DuckDBPyConnection, qualified: str) -> bool:
    """Whether table or view `schema.name` exists (asked without writing: works read-only)."""
    schema, table = qualified.split(".")
    row = conn.execute(
        "SELECT count(*) FROM information_schema.tables WHERE table_schema = ? AND table_name = ?",
        [schema, table],
    ).fetchone()
    return bool(row and row[0])


def read_schema(
    conn: duckdb.DuckDBPyConnection, schema: str, *, keep_codes: bool = False
) -> dict[str, pl.DataFrame]:
    """Every table of a schema, by name (``keep_codes``: see :func:`read_table`)."""
    names = conn.execute(
        "SELECT table_name FROM information_schema.tables "
        f"WHERE table_schema = {_text(_identifier(schema))} ORDER BY table_name"
    ).fetchall()
    if not names:
        raise WarehouseError(f"warehouse schema {schema!r} is empty or missing")
    return {name: read_table(conn, schema, name, keep_codes=keep_codes) for (name,) in names}


def upsert_in_order(
    conn: duckdb.DuckDBPyConnection,
    qualified: str,
    rows: pl.DataFrame,
    select: str = "SELECT * FROM incoming_rows",
) -> None:
    """Insert `rows` (through `select`, which reads them as `incoming_rows`) into the table
    `qualified`, replacing stored rows with the same primary key, in the order they come;
    of rows sharing a key, the last wins (as `INSERT OR REPLACE` would have it).

    DuckDB's `INSERT OR REPLACE` and `ON CONFLICT DO UPDATE` do not keep that order (of 100
    loads of 7 rows into an empty table, none kept it), so the row ids a reader takes as
    "the order loaded" would be another order, and not the same one twice. Here the stored
    rows of the incoming keys are deleted, then the rows inserted as they come (a replaced
    row takes its new place). Call inside a transaction.
    """
    schema, _, table = qualified.rpartition(".")
    found = conn.execute(
        "SELECT constraint_column_names FROM duckdb_constraints() WHERE schema_name = ? "
        "AND table_name = ? AND constraint_type = 'PRIMARY KEY'",
        [schema or "main", table],
    ).fetchone()
    if found is None:
        raise ValueError(f"{qualified} has no primary key to replace rows by")
    keys: list[str] = list(found[0])
    latest = rows.unique(subset=keys, keep="last", maintain_order=True)
    matched = " AND ".join(f"{qualified}.{key} = incoming.{key}" for key in keys)
    conn.register("incoming_rows", latest.to_arrow())
    try:
        conn.execute(f"DELETE FROM {qualified} USING ({select}) AS incoming WHERE {matched}")
        conn.execute(f"INSERT INTO {qualified} BY NAME {select}")
    finally:
        conn.unregister("incoming_rows")
