"""The product lane's `run_sql` tool: one guarded SELECT over a world-only DuckDB file.

Three walls, each enough to keep the answer key out on its own:
1. the guard (`sql_guard.SqlGuard`): sqlglot parse, one SELECT over world tables only;
2. DuckDB's own parser must agree it is exactly one SELECT, and only that one statement
   object is executed;
3. the database (`agent_db.build_agent_world_db`): a separate file holding only the
   `world` tables, opened read-only with external access off (no file scans, ATTACH,
   extension loading) and configuration locked, so even a query the guard wrongly
   passed cannot reach `truth`, `meta` or `runs`: they are not there.

Public surface (what the product lane builds on):

    build_agent_world_db(warehouse: Path, out: Path) -> Path        # agent_db
        copy the warehouse's world tables into <out>/world-<fp16>/world.duckdb, once per
        world fingerprint; returns the file. The usual `out` is paths.agent_world_dir().
    agent_world_db_path(out: Path, fingerprint: str) -> Path        # agent_db
    open_agent_world_db(path: Path) -> DuckDBPyConnection          # agent_db
        the only way to open the file in a process that also runs the tool: DuckDB
        refuses a second connection with another configuration (AGENT_DB_CONFIG).
    AgentWorldInfo                                                   # agent_db
        plugin, generator_version, seed, scale, fingerprint of the copied world.

    AgentSql(path: Path, *, row_limit: int = ROW_LIMIT, timeout_s: float = DEFAULT_TIMEOUT_S)
        .run(query: str) -> SqlResult       guarded; raises SqlToolError subclasses
        .world: AgentWorldInfo              which world the file holds
        .world_tables: tuple[str, ...]      table names a query may read
        .guard: SqlGuard                    .check(query) -> CheckedQuery(sql, tables),
                                            refusing without running (e.g. for traces)
        .close() / context manager
    SqlResult (frozen): columns, column_types, rows (JSON-safe: dates and times as ISO
        text, Decimals and intervals as text, bytes as hex), row_count, truncated,
        row_limit, elapsed_ms, tables (world tables read).

    Errors (eval_pipeline.lanes.errors), each with `.reason` to hand back to the agent:
        SqlRefusedError   the guard (or DuckDB's parser) refused; nothing ran
        SqlExecutionError DuckDB rejected the query or failed running it (bad column...)
        SqlTimeoutError   interrupted at the time limit; the tool stays usable
    All derive from SqlToolError(LaneError); a lane turns them into tool error results.

Elapsed time counts the whole call (guard, DuckDB, conversion). The time limit covers
execution and fetching; a timed-out query leaves the tool usable. Values: ENUM columns of
the world read back as text and are typed VARCHAR; DuckDB error text is passed on with
ENUM types shortened to VARCHAR and at most MAX_MESSAGE_CHARS characters; cells are not
truncated (200 rows of long clause bodies can be large).

Thread safety: `run` may be called from several threads at once (the lane calls it from
asyncio through a worker thread); each call gets its own DuckDB cursor. Close the tool
only after the calls have returned.
"""

from __future__ import annotations

import datetime as dt
import math
import re
import threading
import time
import uuid
from decimal import Decimal
from pathlib import Path
from types import TracebackType
from typing import Any, Self

import duckdb
from pydantic import JsonValue

from eval_pipeline.lanes.agent_db import (
    AgentWorldInfo,
    open_agent_world_db,
    read_agent_world_info,
)
from eval_pipeline.lanes.errors import (
    AgentWorldDbError,
    SqlExecutionError,
    SqlRefusedError,
    SqlTimeoutError,
)
from eval_pipeline.lanes.sql_guard import CheckedQuery, SqlGuard
from eval_pipeline.records import FrozenRecord

ROW_LIMIT = 200  # the tool schema's promise (world/label/tools.py)
DEFAULT_TIMEOUT_S = 5.0
MAX_MESSAGE_CHARS = 800

# Functions DuckDB lists as table functions, table macros or pragmas only, and the
# postgres-compatibility macros: refused in any position, beyond the guard's own list.
_CATALOG_DENIED_FUNCTIONS = """
SELECT DISTINCT function_name FROM duckdb_functions()
WHERE function_type IN ('table', 'table_macro', 'pragma') OR schema_name = 'pg_catalog'
EXCEPT
SELECT function_name FROM duckdb_functions()
WHERE schema_name = 'main' AND function_type IN ('scalar', 'aggregate', 'macro')
"""

# DuckDB spells an ENUM type with every value; a 2,400-value list helps no agent. The
# pattern is unambiguous (values need a comma between them), so it stays linear on text an
# agent controls, such as its own query echoed in an error.
_ENUM_TYPE = re.compile(r"ENUM\('(?:[^']|'')*'(?:,\s*'(?:[^']|'')*')*\)")


class SqlResult(FrozenRecord):
    """What `run_sql` returns: at most `row_limit` rows, JSON-safe, and whether more existed."""

    columns: tuple[str, ...]
    column_types: tuple[str, ...]
    rows: tuple[tuple[JsonValue, ...], ...]
    row_count: int
    truncated: bool
    row_limit: int
    elapsed_ms: float
    tables: tuple[str, ...]


def _json_safe(value: Any) -> JsonValue:
    """A DuckDB value as JSON: exact numbers and dates as text, containers recursively."""
    if value is None or isinstance(value, str | bool | int):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if isinstance(value, Decimal | dt.timedelta | uuid.UUID):
        return str(value)
    if isinstance(value, dt.date | dt.time):  # datetime is a date
        return value.isoformat()
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value).hex()
    if isinstance(value, list | tuple):
        return [_json_safe(item) for item in value]
    if isinstance(value, dict):
        return {str(key): _json_safe(item) for key, item in value.items()}
    return str(value)


def _type_name(column_type: Any) -> str:
    """A result column's type as the agent should read it: ENUM columns are text."""
    if column_type.id == "enum":
        return "VARCHAR"
    name = str(column_type)
    return _ENUM_TYPE.sub("VARCHAR", name) if "ENUM(" in name else name


def _agent_message(error: duckdb.Error) -> str:
    """DuckDB's message for the agent: ENUM types shown as VARCHAR, bounded length."""
    text = str(error).strip()
    if "ENUM(" in text:
        text = _ENUM_TYPE.sub("VARCHAR", text)
    if len(text) > MAX_MESSAGE_CHARS:
        text = text[: MAX_MESSAGE_CHARS - 1] + "…"
    return text


# Column types whose Python values are already JSON (ENUM values come back as str).
_PLAIN_TYPES = frozenset(
    {
        "varchar",
        "enum",
        "boolean",
        "tinyint",
        "smallint",
        "integer",
        "bigint",
        "hugeint",
        "utinyint",
        "usmallint",
        "uinteger",
        "ubigint",
        "uhugeint",
    }
)


def _json_rows(
    fetched: list[tuple[Any, ...]], type_ids: list[str]
) -> tuple[tuple[JsonValue, ...], ...]:
    """Rows as JSON-safe tuples, converting only the columns whose type needs it."""
    convert = [i for i, type_id in enumerate(type_ids) if type_id not in _PLAIN_TYPES]
    if not convert:
        return tuple(fetched)
    rows = []
    for row in fetched:
        values = list(row)
        for i in convert:
            values[i] = _json_safe(values[i])
        rows.append(tuple(values))
    return tuple(rows)


class _Deadline:
    """Interrupts one cursor when its time is up, unless the call already finished."""

    def __init__(self, cursor: duckdb.DuckDBPyConnection, at: float) -> None:
        self.at = at
        self._cursor = cursor
        self._lock = threading.Lock()
        self._finished = False
        self.fired = False

    def fire(self) -> None:
        with self._lock:
            if not self._finished:
                self.fired = True
                self._cursor.interrupt()

    def finish(self) -> None:
        with self._lock:
            self._finished = True


class _Watchdog:
    """One thread per tool that fires deadlines. A `threading.Timer` per query would start
    an OS thread each call (0.2-0.3 ms, a tenth of a small query), and waking this thread
    on every call costs as much; so when idle it sleeps one timeout at a time, and a
    query only wakes it when its deadline comes before the planned wake-up."""

    def __init__(self, idle_s: float) -> None:
        self._idle_s = idle_s
        self._wake = threading.Condition()
        self._armed: set[_Deadline] = set()
        self._wake_at = 0.0
        self._closed = False
        self._thread = threading.Thread(target=self._loop, name="run_sql-watchdog", daemon=True)
        self._thread.start()

    def arm(self, deadline: _Deadline) -> None:
        with self._wake:
            self._armed.add(deadline)
            if deadline.at < self._wake_at:
                self._wake.notify()

    def disarm(self, deadline: _Deadline) -> None:
        deadline.finish()
        with self._wake:
            self._armed.discard(deadline)

    def _loop(self) -> None:
        with self._wake:
            while not self._closed:
                now = time.monotonic()
                for deadline in [armed for armed in self._armed if armed.at <= now]:
                    self._armed.discard(deadline)
                    deadline.fire()
                self._wake_at = min((armed.at for armed in self._armed), default=now + self._idle_s)
                self._wake.wait(max(self._wake_at - now, 0.0))

    def close(self) -> None:
        with self._wake:
            self._closed = True
            self._wake.notify()
        self._thread.join()


class AgentSql:
    """The `run_sql` tool over one agent world database (see the module docstring)."""

    def __init__(
        self,
        path: Path,
        *,
        row_limit: int = ROW_LIMIT,
        timeout_s: float = DEFAULT_TIMEOUT_S,
    ) -> None:
        if row_limit < 1:
            raise ValueError(f"row_limit must be at least 1, got {row_limit}")
        if timeout_s <= 0:
            raise ValueError(f"timeout_s must be positive, got {timeout_s}")
        self.path = path
        self.row_limit = row_limit
        self.timeout_s = timeout_s
        self._con = open_agent_world_db(path)
        self._lock = threading.Lock()
        try:
            self.world: AgentWorldInfo = read_agent_world_info(self._con)
            tables = [
                name
                for (name,) in self._con.execute(
                    "SELECT table_name FROM duckdb_tables() "
                    "WHERE database_name = current_database() AND schema_name = 'main' "
                    "ORDER BY table_name"
                ).fetchall()
            ]
            if not tables:
                raise AgentWorldDbError(f"agent world database {path} holds no world tables")
            denied = [name for (name,) in self._con.execute(_CATALOG_DENIED_FUNCTIONS).fetchall()]
        except BaseException:
            self._con.close()
            raise
        self.guard = SqlGuard(tables, denied_functions=denied)
        self._watchdog = _Watchdog(idle_s=timeout_s)
        self._closed = False

    @property
    def world_tables(self) -> tuple[str, ...]:
        return self.guard.world_tables

    def run(self, query: str) -> SqlResult:
        """Guard, then run `query`; at most `row_limit` rows, stopped at `timeout_s`."""
        started = time.perf_counter()
        checked = self.guard.check(query)
        return self._execute(checked, started, guarded=True)

    def _execute_unguarded(self, query: str) -> SqlResult:
        """The raw path, with neither the guard nor DuckDB's statement check: only for
        tests proving the database itself keeps the answer key out. Never give an agent
        this path."""
        return self._execute(CheckedQuery(sql=query, tables=()), time.perf_counter(), guarded=False)

    def _execute(self, checked: CheckedQuery, started: float, *, guarded: bool) -> SqlResult:
        with self._lock:
            if self._closed:
                raise AgentWorldDbError(f"run_sql on {self.path} was called after close()")
            cursor = self._con.cursor()
        try:
            statement = self._one_select(cursor, checked.sql) if guarded else checked.sql
            deadline = _Deadline(cursor, time.monotonic() + self.timeout_s)
            self._watchdog.arm(deadline)
            try:
                cursor.execute(statement)
                fetched = cursor.fetchmany(self.row_limit + 1)
                description = cursor.description or []
            except duckdb.InterruptException as error:
                if deadline.fired:
                    raise SqlTimeoutError(
                        f"the query ran longer than {self.timeout_s:g} s and was stopped; "
                        "narrow it (filter, aggregate or LIMIT) and try again"
                    ) from error
                raise SqlExecutionError(_agent_message(error)) from error
            except duckdb.Error as error:
                raise SqlExecutionError(_agent_message(error)) from error
            finally:
                self._watchdog.disarm(deadline)
        finally:
            with self._lock:
                cursor.close()
        truncated = len(fetched) > self.row_limit
        rows = _json_rows(fetched[: self.row_limit], [column[1].id for column in description])
        # Built from values _json_rows made JSON-safe; validating 200 rows of JsonValue
        # again would cost about as much as the query (a test re-validates a dump).
        return SqlResult.model_construct(
            columns=tuple(column[0] for column in description),
            column_types=tuple(_type_name(column[1]) for column in description),
            rows=rows,
            row_count=len(rows),
            truncated=truncated,
            row_limit=self.row_limit,
            elapsed_ms=(time.perf_counter() - started) * 1000,
            tables=checked.tables,
        )

    @staticmethod
    def _one_select(cursor: duckdb.DuckDBPyConnection, sql: str) -> duckdb.Statement:
        """DuckDB's own reading of the text must be exactly one SELECT; that one
        statement object is what runs, so nothing after it can ride along."""
        try:
            statements = cursor.extract_statements(sql)
        except duckdb.Error as error:
            raise SqlExecutionError(_agent_message(error)) from error
        if len(statements) != 1:
            raise SqlRefusedError(
                f"only one statement is allowed: DuckDB reads the query as {len(statements)}"
            )
        statement = statements[0]
        if statement.type != duckdb.StatementType.SELECT:
            raise SqlRefusedError(
                "only one SELECT over the world tables is allowed: DuckDB reads the query as "
                f"{statement.type.name}"
            )
        return statement

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
        self._watchdog.close()
        self._con.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()
